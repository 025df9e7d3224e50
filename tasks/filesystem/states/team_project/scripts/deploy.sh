#!/usr/bin/env bash
# usage: deploy.sh <env> <version>
set -euo pipefail
ENV=$1; VERSION=$2
kubectl --context "harbor-$ENV" -n harbor set image deploy/api-gateway api-gateway=ghcr.io/harbor/api-gateway:$VERSION
kubectl --context "harbor-$ENV" -n harbor set image deploy/billing-worker billing-worker=ghcr.io/harbor/billing-worker:$VERSION
kubectl --context "harbor-$ENV" -n harbor set image deploy/notifier notifier=ghcr.io/harbor/notifier:$VERSION

"""Field checks the EvalRun models share: keys by name only, images, URLs without credentials, quantities, labels."""

from __future__ import annotations

import re
from decimal import Decimal

ENV_VAR_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


# The results store's S3 credentials, in every runner's environment: named as a model's (or the judge's) key,
# they would be sent to that model's provider, whose URL the spec's author chooses.
STORE_CREDENTIALS = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"})
# A container image reference as the container runtimes parse it: [registry[:port]/]path[:tag][@digest], the path
# in lowercase. Anything else gives pods that never start (InvalidImageName), each trial an infra error.
_IMAGE_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
IMAGE_REF = re.compile(
    rf"(?:{_REGISTRY}/)?{_IMAGE_PART}(?:/{_IMAGE_PART})*(?::\w[\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)


def check_key_env(name: str | None) -> str | None:
    """Refuse an apiKeyEnv naming the results store's credentials (see STORE_CREDENTIALS)."""
    if name is not None and name.upper() in STORE_CREDENTIALS:
        raise ValueError(
            f"'{name}' holds the results store's S3 credentials, which would be sent to the model's provider as "
            "its API key; put the model's key in a variable of its own and name that"
        )
    return name


def check_image(image: str | None) -> str | None:
    """Refuse what no container runtime can pull (see IMAGE_REF), naming the expected shape; empty: the default."""
    if image and (len(image) > 512 or not IMAGE_REF.fullmatch(image)):
        raise ValueError(
            f"'{image[:80]}' is not a container image reference: [registry[:port]/]repository[:tag][@sha256:<digest>], "
            "the repository in lowercase (e.g. ghcr.io/mcpfleet/runner:0.1.0); a pod with it would never start"
        )
    return image


def check_no_surrounding_space(text: str) -> str:
    """Refuse text with leading or trailing whitespace (a stray space, a YAML block scalar's newline): it would
    reach a provider in every call (`openai/gpt-5 `) or name a folder with a space in it (`runs `)."""
    if text != text.strip():
        raise ValueError(f"{text[:80]!r} starts or ends with whitespace; remove it")
    return text


SECRET_QUERY = re.compile(r"(key|token|secret|password|passwd|signature|credential|auth)", re.IGNORECASE)
# What an API key looks like where no key belongs (a model string, a URL's path): a parameter named like one
# (api_key=..., token:...), or a part starting as providers' keys do (sk-..., AKIA..., ghp_..., AIza..., hf_...).
SECRET_TEXT = re.compile(
    r"(?<![a-z0-9])(api[-_]?key|key|token|secret|password|passwd|signature|credential|auth)[^/=:&;?#]{0,20}[=:]"
    r"|(^|[/=:?&;#@,])(?-i:sk-|sk_|rk_|AKIA[0-9A-Z]{12}|ASIA[0-9A-Z]{12}|ghp_|gho_|github_pat_|glpat-|xox[abpr]-"
    r"|AIza|hf_|gsk_)",
    re.IGNORECASE,
)


def check_no_secret_text(text: str) -> str:
    """Refuse a model string that carries what looks like a key: it is copied into run.json, every record, the
    EvalRun and its pods. A scripted model's options (``scripted/oracle?key=...&fault=auth``) are test settings
    of mcpfleet's own server, no credential."""
    if not text.startswith("scripted/") and SECRET_TEXT.search(text):
        raise ValueError(
            "looks like it carries a credential (a key=value or a key such as sk-...); give the bare model string "
            "and put the key in the environment variable named by apiKeyEnv (or apiKeySecretRef in a cluster)"
        )
    return text


def shown_url(url: str) -> str:
    """A URL safe to print: its user-info and the values of its query parameters replaced."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = ("***@" if "@" in parts.netloc else "") + host + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "<unparseable URL>"
    query = "&".join(f"{q.split('=', 1)[0]}=***" if "=" in q else q for q in parts.query.split("&") if q)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def check_no_credentials(url: str | None) -> str | None:
    """Refuse a URL that is not http(s) (every call would fail: a run of retried provider errors), or that carries
    credentials (user:password@, ?api_key=...): the spec is copied into run.json, the EvalRun's status, events and
    every trial pod. Secrets go through apiKeyEnv or a Secret reference."""
    if url is None:
        return None
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:  # every trial would fail on its first call
        raise ValueError(f"'{shown_url(url)}' is not an http(s) URL; write it as http(s)://host[:port][/path]")
    if "@" in parts.netloc:
        raise ValueError(
            f"'{shown_url(url)}' embeds credentials (user-info before '@'); put the key in the environment "
            "variable named by apiKeyEnv (or apiKeySecretRef in a cluster) and give the URL without it"
        )
    try:
        parts.port  # noqa: B018 - reading it checks it: every call would fail on a port out of 0..65535
    except ValueError:
        raise ValueError(
            f"'{parts.scheme}://{parts.hostname}:...' has no valid port (a number 1-65535); fix the port"
        ) from None
    bare = f"{parts.scheme}://{parts.netloc}"
    if parts.fragment:  # never sent to the server: no use but to hide a key
        raise ValueError(f"'{bare}/...#***' has a #fragment, which is never sent; give the URL without it")
    if SECRET_TEXT.search(unquote(parts.path)):
        raise ValueError(
            f"'{bare}/***' looks like it carries credentials in its path; use apiKeyEnv or apiKeySecretRef for "
            "keys, and credentialsSecretRef or the environment for S3"
        )
    query = parts.query.replace(";", "&")  # servers that split parameters at ';' too would read a key there
    named = sorted({k for k, _ in parse_qsl(query, keep_blank_values=True) if SECRET_QUERY.search(k)})
    if named:
        raise ValueError(
            f"'{shown_url(url)}' carries credentials in its query ({', '.join(named)}); use apiKeyEnv or "
            "apiKeySecretRef for keys, and credentialsSecretRef or the environment for S3"
        )
    return url


def check_s3_uri(v: str) -> None:
    if not v.startswith("s3://"):
        raise ValueError("must be a local path or s3://bucket/prefix")
    if not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", v):
        raise ValueError("s3 URI must be s3://<bucket>/<prefix> with a valid bucket name")


# Kubernetes' quantity grammar (k8s.io/apimachinery resource.Quantity), without the sign a resource may not have:
# a number, then a binary suffix (Ki..Ei), a decimal one (n, u, m, k, M..E) or an exponent (e3, E-2).
QUANTITY = r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$"
_QUANTITY_SCALE = {
    **{s: 1024**i for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
    **{s: 1000**i for i, s in enumerate(("k", "M", "G", "T", "P", "E"), 1)},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
}


def quantity_value(q: str) -> Decimal:
    """The value of a Kubernetes quantity (matching QUANTITY): '500m' -> 0.5, '1Gi' -> 1073741824."""
    m = re.fullmatch(QUANTITY, q)
    if m is None:
        raise ValueError(f"'{q[:40]}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)")
    number, suffix = Decimal(m.group(1)), m.group(3) or ""
    if suffix[1:] and suffix[:1] in ("e", "E") and suffix != "Ei":  # an exponent; "E" alone is exa, "Ei" exbi
        return number.scaleb(int(suffix[1:]))
    return number * _QUANTITY_SCALE.get(suffix, 1)


LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is no Kubernetes label key ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if not (len(name) <= 63 and re.fullmatch(LABEL_NAME, name)):
        return (
            "not a label key: [prefix/]name, the name at most 63 letters, digits, '-', '_' or '.', starting and "
            "ending with a letter or digit"
        )
    if "/" in key and not (len(prefix) <= 253 and re.fullmatch(DNS_SUBDOMAIN, prefix)):
        return "not a label key: its prefix (before '/') must be a DNS subdomain (e.g. node.kubernetes.io)"
    return None


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Refuse what the API server refuses in a label map (a nodeSelector, a pod's labels): every trial pod of the
    run would be refused alike."""
    for key, value in labels.items():
        if problem := label_key_problem(key):
            raise ValueError(f"key '{key[:80]}': {problem}")
        if value and not (len(value) <= 63 and re.fullmatch(LABEL_NAME, value)):
            raise ValueError(
                f"{key}: value '{value[:80]}' is not a label value: at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit (or empty)"
            )
    return labels

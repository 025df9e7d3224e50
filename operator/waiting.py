"""The waiting reasons of a container that will not pass by waiting: one list for the scheduling diagnostics (a
cause reported at once), the pod reader (the try given up at once) and the not-scored causes (image_pull or
container_config), so the three never disagree on which reasons are fatal."""

from __future__ import annotations

# A container that cannot get its image (ErrImageNeverPull: imagePullPolicy Never and the node has not got it).
IMAGE_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
# A container that cannot be created: a missing Secret or ConfigMap, a bad mount.
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
STUCK_REASONS = IMAGE_REASONS | CONFIG_REASONS

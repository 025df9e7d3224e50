"""Task packs: discovery and selection, S3-mirrored packs, content digests and validation."""

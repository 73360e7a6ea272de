"""ddtree-deploy: ship versioned patchsets into an installed SGLang and prove they work."""

__version__ = "0.1.0"

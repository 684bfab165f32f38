"""Model tests: plain synchronous code (config, manifests, registry, trust, ...)."""

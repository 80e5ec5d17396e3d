"""The service's torch-free machinery: settings, worker pool, cache, permalink store, limits."""

"""The scheduler's plugins, one module each, named after upstream's (pkg/scheduler/framework/plugins)."""

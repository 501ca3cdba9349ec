"""Third-party benchmarks played through toolbias's own episode loop (imported at run time)."""

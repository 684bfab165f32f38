"""End to end: a real daemon, real extension processes, a real socket."""

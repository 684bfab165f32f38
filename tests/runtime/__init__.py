"""Runtime tests in process: trio, virtual time where there are deadlines."""

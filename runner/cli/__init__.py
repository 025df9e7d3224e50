"""The ``mcpfleet`` command line: a thin face over the packages below, one module per command group."""

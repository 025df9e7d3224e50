"""Small helpers with no mcpfleet imports: process lifelines, temp folders, file modes, path overlap, printable text."""

from ridgeline.cli import entry

entry()

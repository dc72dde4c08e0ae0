from ridgeline._entry import entry

entry()

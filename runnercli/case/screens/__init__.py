"""A case's screen: the frames a harness writes (`watcher`), sent while it runs through
`calls` (`report_case_screen`) by the `Screens` stage (`stage`)."""

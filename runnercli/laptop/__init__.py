"""The runner on the member's machine: awake while it works (`inhibit`), paused on battery
(`power`), its report for `status` (`state`), the pidfile that finds it for `drain`
(`pidfile`), updates that say how (`updates`), and all of it as one part of a running runner
(`part`)."""

// Package cmdutil is what every pipette-launch command shares: the IO
// streams, building and running the CLI (exit codes 0/1/2/3, --json errors
// as one object), the flags common to several commands (SSH, --report,
// --launcher) and loading the inputs they all take (model, cluster
// subsetting). It knows no command: commands import it, never the reverse.
package cmdutil

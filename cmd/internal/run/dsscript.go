package run

import (
	"io"
	"path/filepath"

	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
)

// dsInScript is deepspeed.InScript for the run's script, read here
// (relative to --workdir; a module's source is not looked for).
func dsInScript(o *Options, ds *deepspeed.UserConfig, planned bool) bool {
	flag, _, _ := userDSConfigFlag(o)
	return deepspeed.InScript(ds, flag, planned, func() string {
		path := o.Script
		if o.WorkDir != "" && !filepath.IsAbs(path) {
			path = filepath.Join(o.WorkDir, path)
		}
		f, err := inputfile.Open(path)
		if o.Module || err != nil {
			return ""
		}
		defer f.Close()
		src, _ := io.ReadAll(io.LimitReader(f, 4<<20))
		return string(src)
	})
}

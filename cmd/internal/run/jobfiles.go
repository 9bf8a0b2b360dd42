package run

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/templates"
)

// realJobID names one launch: the job name, when it started and a random
// part, so two launches from one directory (or one shared filesystem)
// never share a files directory (Options.NewJobID when nil).
func realJobID(name string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return text.SafeName(name) + "-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// jobFilesDir is where the job's generated files (ds_config.json,
// hostfile) go, the same for every render of one run: --output-dir itself
// (the scripts name its absolute path), else a private directory of this
// launch, templates.DefaultFilesDir(<job-id>); never inside the launch
// directory, which a launch leaves exactly as it was.
func jobFilesDir(o *Options) string {
	if o.filesDir != "" {
		return o.filesDir
	}
	o.filesDir = templates.DefaultFilesDir(o.newJobID()(o.RunID))
	if o.OutputDir != "" {
		if abs, err := filepath.Abs(o.OutputDir); err == nil {
			o.filesDir = filepath.ToSlash(abs)
		}
	}
	return o.filesDir
}

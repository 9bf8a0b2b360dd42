package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// writeOutputDir writes <host>.sh per host plus the job's files. The
// directory is the user's own and no one else can write it
// (atomicfile.OwnDir; made 0700 when missing), and private (no group or
// other access) when the ranks' environment holds a secret (HF_TOKEN, ...).
// The scripts are the owner's only (0700): they carry that environment.
// No file is written through a link, and none that is already there is
// replaced without --force (pipette-launch cannot tell its own earlier
// output from the user's files, so it replaces neither unasked). The files
// go into the directory itself, which the scripts name by its absolute
// path; it never takes the place of the user's own DeepSpeed config.
func writeOutputDir(o *Options, j *job.Job, summary string) error {
	if err := ownOutputDir(o.OutputDir, secretNames(j)); err != nil {
		return err
	}
	if flag, path, file := userDSConfigFlag(o); path != "" {
		mine, _ := os.Stat(file)
		for _, f := range j.Files {
			if st, err := os.Stat(filepath.Join(o.OutputDir, f.Path)); err == nil && mine != nil && os.SameFile(st, mine) {
				return cmdutil.InputErrorf("--output-dir %s: writing %s there would overwrite your %s %s: choose another directory", o.OutputDir, f.Path, flag, path)
			}
		}
	}
	var files []atomicfile.File
	labels := job.HostLabels(j.Hosts)
	for i, h := range j.Hosts {
		if strings.ContainsAny(h.Name, "/\x00") || h.Name == "." || h.Name == ".." {
			return fmt.Errorf("--output-dir: host name %q cannot be a file name", h.Name)
		}
		// name:port becomes name_port: a colon is awkward in file names.
		files = append(files, atomicfile.File{Name: strings.ReplaceAll(labels[i], ":", "_") + ".sh", Data: []byte(h.Script), Perm: 0o700})
	}
	for _, f := range j.Files {
		files = append(files, atomicfile.File{Name: f.Path, Data: f.Content, Perm: os.FileMode(f.Mode)})
	}
	if err := outputDirError(atomicfile.CreateAll(o.OutputDir, files, o.Force)); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(o.IO.Out, "wrote %s\n", filepath.Join(o.OutputDir, filepath.FromSlash(f.Name)))
	}
	fmt.Fprintf(o.IO.Out, "# %s\n", summary)
	if o.probeNote != "" {
		fmt.Fprintf(o.IO.Out, "# %s\n", o.probeNote)
	}
	fmt.Fprintf(o.IO.Out, "# run each host's script on its host, in the work directory")
	if len(j.Files) > 0 {
		fmt.Fprintf(o.IO.Out, "; the ranks read the job's files from %s: keep this directory at that absolute path on every host (a shared filesystem) or copy it there", j.FilesDir)
	}
	fmt.Fprintf(o.IO.Out, "\n")
	return nil
}

// ownOutputDir makes --output-dir or checks it (atomicfile.OwnDir):
// private when secrets names variables whose values the files hold. A
// directory it refuses is bad input (exit 2).
func ownOutputDir(dir string, secrets []string) error {
	err := atomicfile.OwnDir(dir, len(secrets) > 0)
	var de *atomicfile.DirError
	if errors.As(err, &de) && len(secrets) > 0 && strings.Contains(de.Why, "read by other users") {
		return cmdutil.InputErrorf("--output-dir %v (the scripts hold %s)", err, strings.Join(secrets, ", "))
	}
	if err != nil {
		return cmdutil.InputErrorf("--output-dir %v", err)
	}
	return nil
}

// outputDirError is an error writing into --output-dir as the user reads
// it: a file already there or a link in the way is bad input (exit 2).
func outputDirError(err error) error {
	var ee *atomicfile.ExistsError
	if errors.As(err, &ee) {
		return cmdutil.InputErrorf("--output-dir: %v: pipette-launch replaces no file it finds there (it may be yours, or a link); give --force to replace them, or an empty or new directory", err)
	}
	var de *atomicfile.DirError
	if errors.As(err, &de) {
		return cmdutil.InputErrorf("--output-dir: %v", err)
	}
	if err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	return nil
}

// secretNames are the variables of any rank whose values must not be
// shown (templates.Secret), sorted.
func secretNames(j *job.Job) []string {
	var out []string
	for _, h := range j.Hosts {
		for _, r := range h.Ranks {
			for _, e := range r.Env {
				if templates.Secret(e.Name) && !slices.Contains(out, e.Name) {
					out = append(out, e.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// notInScripts are warnings for the flags given that the scripts
// --output-dir writes cannot carry: what run's supervision does across
// hosts (restarts of every host at once, the heartbeat, output filters,
// the hang watch, elastic membership) and the preflight run does before
// the job. Each script runs its host's ranks once and stops them when one
// fails there. Nothing when none is given.
func notInScripts(o *Options) []string {
	var given []string
	add := func(on bool, flag string) {
		if on {
			given = append(given, flag)
		}
	}
	add(o.MaxRestarts > 0, fmt.Sprintf("--max-restarts %d", o.MaxRestarts))
	add(o.HeartbeatTimeout != launch.DefaultHeartbeatTimeout, "--heartbeat-timeout "+o.HeartbeatTimeout.String())
	add(o.ProgressTimeout > 0, "--progress-timeout "+o.ProgressTimeout.String())
	add(len(o.QuietRanks) > 0, "--quiet-ranks")
	add(len(o.LocalRanksFilter) > 0, "--local-ranks-filter")
	if nodes, _ := launchline.ParseNNodes(o.NNodes); nodes.Elastic() {
		add(true, "--nnodes "+o.NNodes+" (the scripts are for the hosts written)")
	}
	var out []string
	if len(given) > 0 {
		out = append(out, fmt.Sprintf("%s: the scripts --output-dir writes run each host's ranks once, and a failed rank stops only its own host's; restarts, the heartbeat, output filters, the hang watch and elastic membership are pipette-launch run's, across all hosts, and are not in them", strings.Join(given, ", ")))
	}
	if o.Preflight && !o.PreflightOnly {
		out = append(out, "--preflight: the scripts --output-dir writes start the job without it; write the preflight's own with pipette-launch preflight --output-dir OTHER_DIR and run those first")
	}
	return out
}

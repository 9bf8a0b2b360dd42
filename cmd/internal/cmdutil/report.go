package cmdutil

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/report"
)

// ReportFlags draw the plan: `plan` and `run` (with --dry-run or
// --output-dir) both take them.
func ReportFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "report", Usage: "write a self-contained HTML report of the plans to `FILE` (timeline, placement, memory, why this plan)"},
		&cli.StringFlag{Name: "svg", Usage: "write the report's figures as separate SVG files into `DIR`"},
	}
}

// ReportOptions are where the report goes; both empty: no report.
type ReportOptions struct {
	Path, SVGDir string
}

func ReportOptionsFrom(c *cli.Context) ReportOptions {
	return ReportOptions{Path: c.String("report"), SVGDir: c.String("svg")}
}

func (o ReportOptions) Wanted() bool { return o.Path != "" || o.SVGDir != "" }

// WriteReport builds the report of a search and writes the HTML file
// and/or the SVG files, naming each on errOut.
func WriteReport(o ReportOptions, in report.Input, clusterFile string, io *IOStreams) error {
	if !o.Wanted() {
		return nil
	}
	in.Measured = clusterMeasured(clusterFile)
	if in.ClusterName == "" {
		in.ClusterName = clusterFile
		if clusterFile == "" {
			in.ClusterName = "the embedded example cluster"
		}
	}
	r, err := report.Build(in)
	if err != nil {
		return err
	}
	if o.Path != "" {
		if err := r.WriteFile(o.Path); err != nil {
			return err
		}
		fmt.Fprintf(io.ErrOut, "pipette-launch: report written to %s\n", o.Path)
	}
	if o.SVGDir != "" {
		paths, err := r.WriteSVGs(o.SVGDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.ErrOut, "pipette-launch: %d SVG figures written to %s\n", len(paths), o.SVGDir)
	}
	return nil
}

// clusterMeasured says whether the cluster file carries a measured
// bandwidth matrix (the report labels its heat-map by it).
func clusterMeasured(path string) bool {
	if path == "" {
		return false
	}
	data, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return false
	}
	f, err := cluster.Parse(data)
	return err == nil && f.Measured != nil
}

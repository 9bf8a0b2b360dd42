package templates

import (
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// JobView is what --dry-run --json prints of a job: Describe's content as
// data, with secret-named variables masked the same way (ShownValue).
type JobView struct {
	Name     string     `json:"name"`
	WorkDir  string     `json:"workdir,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
	Hosts    []HostView `json:"hosts"`
	Files    []FileView `json:"files"`
}

// HostView is one host of a JobView.
type HostView struct {
	Name     string     `json:"name"`
	Address  string     `json:"address"`
	User     string     `json:"user,omitempty"`
	Port     int        `json:"port,omitempty"`
	NodeRank int        `json:"node_rank"`
	Ranks    []RankView `json:"ranks"`
}

// RankView is one process of a HostView; Env keeps the job's order.
type RankView struct {
	Rank      int       `json:"rank"`
	LocalRank int       `json:"local_rank"`
	Argv      []string  `json:"argv"`
	Env       []EnvView `json:"env"`
}

// EnvView is one variable as pipette-launch prints it.
type EnvView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FileView is one file of the job, its content as text.
type FileView struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`
	Content string `json:"content"`
}

// View is the job as --dry-run --json prints it.
func View(job *job.Job) JobView {
	v := JobView{Name: job.Name, WorkDir: job.WorkDir, Warnings: job.Warnings, Hosts: []HostView{}, Files: []FileView{}}
	for _, h := range job.Hosts {
		hv := HostView{Name: h.Name, Address: h.Address, User: h.User, Port: h.Port, NodeRank: h.NodeRank, Ranks: []RankView{}}
		for _, r := range h.Ranks {
			rv := RankView{Rank: r.Rank, LocalRank: r.LocalRank, Argv: r.Argv, Env: make([]EnvView, len(r.Env))}
			for i, e := range r.Env {
				rv.Env[i] = EnvView{e.Name, ShownValue(e.Name, e.Value)}
			}
			hv.Ranks = append(hv.Ranks, rv)
		}
		v.Hosts = append(v.Hosts, hv)
	}
	for _, f := range job.Files {
		v.Files = append(v.Files, FileView{job.FilePath(f), f.Mode, string(f.Content)})
	}
	return v
}

// Package k8s renders a job (job.Job, hosts in node-rank order) for
// Kubernetes: a JobSet with one replicated job per island (GPU type), a
// headless Service for the pods' stable names, a ConfigMap with the host
// scripts and generated files, and a Secret for the variables that must not
// be printed; or a Kubeflow Trainer v2 TrainJob where that API can carry the
// plan. Each pod runs the same host script as the SSH and Slurm paths.
// Nothing here talks to a cluster.
//
// # Pods and ranks
//
// Pods of one island are interchangeable: node affinity lets them land on
// any of the island's nodes (by name, or by GPU product label), each
// requests all of the node's GPUs, and pod k of an island (its completion
// index) runs the plan's k-th host of that island in node-rank order, so
// node ranks, rank order and per-host settings follow the plan. MASTER_ADDR
// is node rank 0's pod's stable DNS name, <jobset>-<rjob>-0-0.<service>.
package k8s

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Island is one replicated job: hosts of one GPU type.
type Island struct {
	// Name as in the cluster file; the replicated job's name is derived
	// from it (RJobName).
	Name string
	// Hosts are the island's hosts as the job names them (job.Hosts[].Name):
	// Kubernetes node names when Options.Affinity is AffinityNodeNames.
	Hosts []string
	// GPUProduct is the value of the GPU product label (AffinityGPUProduct).
	GPUProduct string
	// GPUs per node requested for each pod (0: none requested).
	GPUs int
}

// Affinity is how pods are pinned to their island's nodes.
type Affinity string

// The affinities.
const (
	AffinityNodeNames  Affinity = "node-names"  // kubernetes.io/hostname In the island's host names
	AffinityGPUProduct Affinity = "gpu-product" // Options.ProductLabel In the island's GPU product
	AffinityNone       Affinity = "none"        // no affinity (a one-node test cluster)
)

// Format is what Render emits.
type Format string

// The formats.
const (
	FormatJobSet   Format = "jobset"
	FormatTrainJob Format = "trainjob"
)

// Options are the Kubernetes side of a launch (flags or a YAML file).
type Options struct {
	Format Format `yaml:"format"`
	// Name of the JobSet/TrainJob (default the job's name, made a DNS label).
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	// Image runs every pod; it holds the training script and its Python.
	Image           string `yaml:"image"`
	ImagePullPolicy string `yaml:"imagePullPolicy"`
	ServiceAccount  string `yaml:"serviceAccount"`
	PriorityClass   string `yaml:"priorityClass"`
	// Queue is Kueue's local queue (label kueue.x-k8s.io/queue-name).
	Queue string `yaml:"queue"`
	// SchedulerName picks a scheduler for the pods (e.g. volcano).
	SchedulerName string            `yaml:"schedulerName"`
	Labels        map[string]string `yaml:"labels"`
	// Affinity (default node-names); ProductLabel names the GPU product
	// label (default nvidia.com/gpu.product); GPUResource the extended
	// resource (default nvidia.com/gpu).
	Affinity     Affinity `yaml:"affinity"`
	ProductLabel string   `yaml:"productLabel"`
	GPUResource  string   `yaml:"gpuResource"`
	// GPUProducts replaces, per island name, the GPU product label value
	// IslandsOf derives from the catalog model (GPU feature discovery
	// writes e.g. NVIDIA-L40S where the catalog says L40S).
	GPUProducts map[string]string `yaml:"gpuProducts"`
	// PodPatch is a JSON merge patch (RFC 7386) applied to every pod spec
	// last (tolerations, volumes, resources ...).
	PodPatch map[string]any `yaml:"podPatch"`
	// Control, set by run (never for --dry-run), turns on the host
	// scripts' reports to the launcher (job.WithControl) and keeps
	// each container's stdin open, which the scripts' watchdog waits on.
	Control *job.Control `yaml:"-"`
	// Runtime is the ClusterTrainingRuntime a TrainJob names (default
	// torch-distributed).
	Runtime string `yaml:"runtime"`
}

// Manifests are what Render produces. Objects are printed and applied;
// Secret is applied but never printed or written (SecretNote says what it
// holds, without values).
type Manifests struct {
	Objects    []Object
	Secret     Object
	SecretKeys []string
	Warnings   []string
	// Kind, Namespace and Name identify the JobSet or TrainJob.
	Kind, Namespace, Name string
	// MasterAddr is node rank 0's pod's DNS name, as every rank gets it.
	MasterAddr string
	// Pods lists, in node-rank order, the pod each host's script runs in.
	Pods []Pod
	// PodGraceSeconds is the JobSet's pods' terminationGracePeriodSeconds:
	// how long a deleted pod may take to stop its ranks (0: not a JobSet).
	PodGraceSeconds int
}

// Pod is where one node rank runs.
type Pod struct {
	NodeRank int
	Host     string // the plan's host (job.Hosts[].Name)
	RJob     string // replicated job
	Index    int    // completion index within the replicated job
	Name     string // the pod's hostname: <jobset>-<rjob>-0-<index>
	Ranks    []int  // global ranks, in local-rank order
}

// Object is one Kubernetes object as generic JSON-like data.
type Object = map[string]any

// Labels pipette-launch puts on every object.
const (
	LabelJob    = "pipette-launch/job"
	LabelIsland = "pipette-launch/island"
	mountDir    = "/etc/pipette-launch"
	container   = "ranks"
)

// Render turns a job into manifests. islands group job.Hosts (each host in
// exactly one); the first host of job.Hosts is node rank 0.
func Render(j *job.Job, islands []Island, o Options) (*Manifests, error) {
	o = withDefaults(o, j)
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	pods, rjobs, err := placePods(j, islands, o.Name)
	if err != nil {
		return nil, err
	}
	if o.Format == FormatTrainJob {
		// Trainer names the JobSet's one replicated job "node".
		if pods, rjobs, err = trainJobPods(pods, rjobs, o.Name); err != nil {
			return nil, err
		}
	}
	if err := checkPodNames(o, pods); err != nil {
		return nil, err
	}
	m := &Manifests{Pods: pods, Warnings: slices.Clone(j.Warnings), Kind: "JobSet", Namespace: o.Namespace, Name: o.Name}
	if o.Format == FormatTrainJob {
		m.Kind = "TrainJob"
		if o.Control != nil {
			return nil, fmt.Errorf("kubernetes: run needs the JobSet format (a TrainJob's container patch cannot keep stdin open for the scripts' watchdog); use --k8s-format trainjob with --dry-run or --output-dir")
		}
	}
	m.MasterAddr = pods[0].Name + "." + serviceName(o.Name)
	j, secret, err := podJob(j, m.MasterAddr, o.Control)
	if err != nil {
		return nil, err
	}
	cm, err := configMap(j, pods, o)
	if err != nil {
		return nil, err
	}
	if len(secret) > 0 {
		m.Secret = secretObject(o, secret)
		for k := range secret {
			m.SecretKeys = append(m.SecretKeys, k)
		}
		slices.Sort(m.SecretKeys)
	}
	switch o.Format {
	case FormatTrainJob:
		tj, warnings, err := trainJob(islands, rjobs, o, m.SecretKeys)
		if err != nil {
			return nil, err
		}
		m.Warnings = append(m.Warnings, warnings...)
		m.Warnings = append(m.Warnings, trainJobGraceWarning(stopGrace(j, o)))
		m.Objects = []Object{cm, tj}
	default:
		js, podGrace, err := jobSet(islands, rjobs, o, len(secret) > 0, stopGrace(j, o))
		if err != nil {
			return nil, err
		}
		m.Objects, m.PodGraceSeconds = []Object{service(o), cm, js}, podGrace
	}
	return m, nil
}

func withDefaults(o Options, j *job.Job) Options {
	o.Format = cmp.Or(o.Format, FormatJobSet)
	o.Name = cmp.Or(o.Name, dnsLabel(j.Name))
	o.Namespace = cmp.Or(o.Namespace, "default")
	o.ImagePullPolicy = cmp.Or(o.ImagePullPolicy, "IfNotPresent")
	o.Affinity = cmp.Or(o.Affinity, AffinityNodeNames)
	o.ProductLabel = cmp.Or(o.ProductLabel, "nvidia.com/gpu.product")
	o.GPUResource = cmp.Or(o.GPUResource, "nvidia.com/gpu")
	o.Runtime = cmp.Or(o.Runtime, "torch-distributed")
	return o
}

// rjob is one replicated job: an island's pods in node-rank order.
type rjob struct {
	name   string
	island int
	pods   []Pod
}

// placePods maps each host (node rank) to its island's replicated job and
// completion index: pod k of an island runs the island's k-th host.
func placePods(j *job.Job, islands []Island, name string) ([]Pod, []rjob, error) {
	if len(j.Hosts) == 0 {
		return nil, nil, fmt.Errorf("kubernetes: the job has no hosts")
	}
	islandOf := map[string]int{}
	rjobs := make([]rjob, len(islands))
	seen := map[string]string{}
	for i, isl := range islands {
		n := RJobName(isl.Name)
		if other, dup := seen[n]; dup {
			return nil, nil, fmt.Errorf("kubernetes: islands %q and %q both become replicated job %q: rename one in the cluster file", other, isl.Name, n)
		}
		seen[n] = isl.Name
		rjobs[i] = rjob{name: n, island: i}
		for _, h := range isl.Hosts {
			if _, dup := islandOf[h]; dup {
				return nil, nil, fmt.Errorf("kubernetes: host %s is in two islands", h)
			}
			islandOf[h] = i
		}
	}
	var pods []Pod
	for nr, h := range j.Hosts {
		i, ok := islandOf[h.Name]
		if !ok {
			return nil, nil, fmt.Errorf("kubernetes: host %s (node rank %d) is in no island of the cluster", h.Name, nr)
		}
		r := &rjobs[i]
		p := Pod{NodeRank: nr, Host: h.Name, RJob: r.name, Index: len(r.pods)}
		p.Name = fmt.Sprintf("%s-%s-0-%d", name, r.name, p.Index)
		for _, rk := range h.Ranks {
			p.Ranks = append(p.Ranks, rk.Rank)
		}
		r.pods = append(r.pods, p)
		pods = append(pods, p)
	}
	var used []rjob
	for _, r := range rjobs {
		if len(r.pods) > 0 {
			used = append(used, r)
		}
	}
	return pods, used, nil
}

// RJobName is an island's replicated-job name: a DNS-1035 label.
func RJobName(island string) string {
	n := dnsLabel(island)
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "i" + n
	}
	return n
}

// dnsLabel lowercases s and turns what a DNS label cannot hold into '-'.
func dnsLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func serviceName(name string) string { return name }

// podJob is the job as it runs in pods: every rank's MASTER_ADDR is rank 0's
// pod, variables whose values must not be printed move to the Secret (the
// scripts set each rank's variables on top of the inherited ones, so the
// container's environment carries them), and the scripts are rendered
// again from that.
func podJob(in *job.Job, master string, control *job.Control) (*job.Job, map[string]string, error) {
	j := *in
	j.Hosts = slices.Clone(in.Hosts)
	secret := map[string]string{}
	for i := range j.Hosts {
		h := &j.Hosts[i]
		h.Ranks = slices.Clone(h.Ranks)
		for j := range h.Ranks {
			r := &h.Ranks[j]
			var env []job.EnvVar
			for _, e := range r.Env {
				switch {
				case e.Name == "MASTER_ADDR":
					e.Value = master
				case templates.Secret(e.Name):
					if len(e.Name) > 253 || !secretKey.MatchString(e.Name) {
						return nil, nil, fmt.Errorf("kubernetes: variable %q goes to the Secret (its name says it is secret), whose keys may hold only letters, digits, '-', '_' and '.' (at most 253): rename it", e.Name)
					}
					if v, ok := secret[e.Name]; ok && v != e.Value {
						return nil, nil, fmt.Errorf("kubernetes: %s differs between ranks; a Secret holds one value for every pod", e.Name)
					}
					secret[e.Name] = e.Value
					continue
				}
				env = append(env, e)
			}
			r.Env = env
		}
	}
	for i := range j.Hosts {
		s, err := job.HostScript(&j, i)
		if err != nil {
			return nil, nil, err
		}
		if control != nil {
			s = job.WithControl(s, *control)
		}
		j.Hosts[i].Script = s
	}
	return &j, secret, nil
}

// filePath is where a job file lands in the pod, relative to the
// container's working directory unless absolute.
func filePath(j *job.Job, f job.File) string {
	p := j.FilePath(f)
	if j.WorkDir != "" && !path.IsAbs(p) {
		p = path.Join(j.WorkDir, p)
	}
	return p
}

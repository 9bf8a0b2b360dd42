package k8s

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// configMapLimit is the apiserver's limit on a ConfigMap's data.
const configMapLimit = 1 << 20

// service is the headless Service that gives each pod its stable DNS name
// (<pod hostname>.<service>) before it is ready: rank 0 serves the
// rendezvous store before anything is ready.
func service(o Options) Object {
	return Object{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   meta(o, serviceName(o.Name), nil),
		"spec": Object{
			"clusterIP":                "None",
			"publishNotReadyAddresses": true,
			"selector":                 Object{"jobset.sigs.k8s.io/jobset-name": o.Name},
		},
	}
}

// configMap holds each host's script, the pod entrypoint that picks one by
// replicated job and completion index, and the job's generated files.
func configMap(j *job.Job, pods []Pod, o Options) (Object, error) {
	data := Object{"entrypoint.sh": entrypoint(j, pods)}
	size := len(data["entrypoint.sh"].(string))
	for _, p := range pods {
		s := j.Hosts[p.NodeRank].Script
		data[hostScriptKey(p.NodeRank)] = s
		size += len(s)
	}
	for i, f := range j.Files {
		data[fileKey(i)] = string(f.Content)
		size += len(f.Content)
	}
	for k, v := range data {
		if !utf8.ValidString(v.(string)) {
			return nil, fmt.Errorf("kubernetes: ConfigMap entry %s is not UTF-8 text (an argument, variable or file of the job holds other bytes): a ConfigMap's data holds text only", k)
		}
	}
	if size > configMapLimit {
		return nil, fmt.Errorf("kubernetes: the job's scripts and files take %d bytes, more than a ConfigMap holds (%d)", size, configMapLimit)
	}
	return Object{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   meta(o, configMapName(o.Name), nil),
		"data":       data,
	}, nil
}

func configMapName(name string) string { return name + "-scripts" }

// SecretName is the Secret holding the variables that are not printed.
func SecretName(name string) string { return name + "-env" }

func hostScriptKey(nodeRank int) string { return fmt.Sprintf("host-%d.sh", nodeRank) }
func fileKey(i int) string              { return fmt.Sprintf("file-%d", i) }

// entrypoint is the container's command: node rank from the replicated job
// and completion index, the generated files put where the ranks' argv names
// them, then that host's script (which stops its ranks on SIGTERM).
func entrypoint(j *job.Job, pods []Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# pipette-launch: pod entrypoint of job %s. The replicated job and completion\n", shellquote.Comment(shellquote.Quote(j.Name)))
	b.WriteString("# index pick this pod's node rank (pod k of an island runs its k-th host in\n# node-rank order); the job's files are copied into place; the host script runs.\n")
	b.WriteString("set -eu\ncase \"$PIPETTE_RJOB/$PIPETTE_INDEX\" in\n")
	for _, p := range pods {
		fmt.Fprintf(&b, "%s) r=%d ;; # host %s\n", shellquote.Quote(fmt.Sprintf("%s/%d", p.RJob, p.Index)), p.NodeRank, shellquote.Comment(p.Host))
	}
	b.WriteString("*) echo \"pipette-launch: pod $PIPETTE_RJOB/$PIPETTE_INDEX is not in the plan\" >&2; exit 2 ;;\nesac\n")
	if script := j.FilesDirScript(); script != "" {
		b.WriteString(script + "\n")
	}
	for i, f := range j.Files {
		p := filePath(j, f)
		fmt.Fprintf(&b, "mkdir -p %s && cp %s %s && chmod %o %s\n", shellquote.Quote(path.Dir(p)),
			shellquote.Quote(mountDir+"/"+fileKey(i)), shellquote.Quote(p), f.Mode, shellquote.Quote(p))
	}
	fmt.Fprintf(&b, "exec /bin/sh %s/host-$r.sh\n", mountDir)
	return b.String()
}

func secretObject(o Options, values map[string]string) Object {
	data := Object{}
	for k, v := range values {
		data[k] = v
	}
	return Object{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   meta(o, SecretName(o.Name), nil),
		"type":       "Opaque",
		"stringData": data,
	}
}

// podStopMarginSeconds is what a pod gets beyond its ranks' grace to end:
// the script's wait for its ranks' sessions and the removal of the job's
// files.
const podStopMarginSeconds = 15

// stopGrace is the seconds the pods' host scripts give their ranks between
// SIGTERM and SIGKILL: the control lines' under run, else what the scripts
// were rendered with (job.Job.StopGrace).
func stopGrace(j *job.Job, o Options) int {
	if o.Control != nil {
		return o.Control.Grace
	}
	return j.StopGraceSeconds()
}

// jobSet has one replicated job per island: an Indexed Job of one pod per
// host, none restarted (a failed rank ends the job, as on SSH).
func jobSet(islands []Island, rjobs []rjob, o Options, hasSecret bool, grace int) (js Object, podGrace int, err error) {
	var rjs []any
	for _, r := range rjobs {
		spec, err := podSpec(islands[r.island], r, o, hasSecret, grace)
		if err != nil {
			return nil, 0, err
		}
		podGrace = max(podGrace, podGraceSeconds(spec))
		labels := Object{LabelIsland: dnsLabel(islands[r.island].Name)}
		n := len(r.pods)
		rjs = append(rjs, Object{
			"name":     r.name,
			"replicas": 1,
			"template": Object{
				"metadata": Object{"labels": labels},
				"spec": Object{
					"parallelism":    n,
					"completions":    n,
					"completionMode": "Indexed",
					"backoffLimit":   0,
					"template": Object{
						"metadata": Object{"labels": mergeLabels(o, labels)},
						"spec":     spec,
					},
				},
			},
		})
	}
	md := meta(o, o.Name, nil)
	if o.Queue != "" {
		md["labels"].(Object)["kueue.x-k8s.io/queue-name"] = o.Queue
	}
	return Object{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   md,
		"spec": Object{
			"network": Object{
				"enableDNSHostnames":       true,
				"subdomain":                serviceName(o.Name),
				"publishNotReadyAddresses": true,
			},
			"failurePolicy":  Object{"maxRestarts": 0},
			"replicatedJobs": rjs,
		},
	}, podGrace, nil
}

// podSpec is one island's pod: the entrypoint, its GPUs, node affinity,
// the scripts' volume, and the user's scheduling settings and patch. grace
// is the seconds the host script gives its ranks between SIGTERM and
// SIGKILL (stopGrace).
func podSpec(isl Island, r rjob, o Options, hasSecret bool, grace int) (Object, error) {
	c := Object{
		"name":            container,
		"image":           o.Image,
		"imagePullPolicy": o.ImagePullPolicy,
		"command":         []any{"/bin/sh", mountDir + "/entrypoint.sh"},
		"env":             podEnv(r.name),
		"volumeMounts":    []any{Object{"name": "pipette-launch", "mountPath": mountDir, "readOnly": true}},
	}
	if o.Control != nil {
		// The scripts' watchdog stops the ranks at EOF on stdin: an open
		// stdin nobody writes to (the pod's end stops them by SIGTERM).
		c["stdin"] = true
	}
	if hasSecret {
		c["envFrom"] = []any{Object{"secretRef": Object{"name": SecretName(o.Name)}}}
	}
	if isl.GPUs > 0 {
		n := strconv.Itoa(isl.GPUs)
		c["resources"] = Object{"limits": Object{o.GPUResource: n}, "requests": Object{o.GPUResource: n}}
	}
	spec := Object{
		"restartPolicy": "Never",
		// The host script stops its ranks on SIGTERM, SIGKILL grace seconds
		// later (PIPETTE_STOP_GRACE_S); the pod gets that and a margin for
		// the script's own end, or the kubelet would kill the ranks first.
		"terminationGracePeriodSeconds": grace + podStopMarginSeconds, // Manifests.PodGraceSeconds
		"containers":                    []any{c},
		"volumes": []any{Object{"name": "pipette-launch", "configMap": Object{
			"name": configMapName(o.Name), "defaultMode": 0o555}}},
	}
	if a := affinity(isl, r, o); a != nil {
		spec["affinity"] = a
	}
	if o.ServiceAccount != "" {
		spec["serviceAccountName"] = o.ServiceAccount
	}
	if o.PriorityClass != "" {
		spec["priorityClassName"] = o.PriorityClass
	}
	if o.SchedulerName != "" {
		spec["schedulerName"] = o.SchedulerName
	}
	if o.PodPatch != nil {
		patched, ok := mergePatch(spec, o.PodPatch).(Object)
		if !ok {
			return nil, fmt.Errorf("kubernetes: the pod patch must be a mapping of pod spec fields")
		}
		spec = patched
	}
	return spec, nil
}

// podGraceSeconds is a pod spec's terminationGracePeriodSeconds as it
// stands after the user's patch (a number from YAML or JSON, or ours).
func podGraceSeconds(spec Object) int {
	switch v := spec["terminationGracePeriodSeconds"].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(math.Ceil(v))
	}
	return 0
}

// podEnv tells the entrypoint which replicated job and completion index
// it runs as.
func podEnv(rjobName string) []any {
	return []any{
		Object{"name": "PIPETTE_RJOB", "value": rjobName},
		Object{"name": "PIPETTE_INDEX", "valueFrom": Object{"fieldRef": Object{
			"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
	}
}

// affinity pins the island's pods to its nodes.
func affinity(isl Island, r rjob, o Options) Object {
	var expr Object
	switch o.Affinity {
	case AffinityNone:
		return nil
	case AffinityGPUProduct:
		product := isl.GPUProduct
		if v, ok := o.GPUProducts[isl.Name]; ok {
			product = v
		}
		expr = Object{"key": o.ProductLabel, "operator": "In", "values": []any{product}}
	default:
		var names []any
		for _, p := range r.pods {
			names = append(names, p.Host)
		}
		expr = Object{"key": "kubernetes.io/hostname", "operator": "In", "values": names}
	}
	return Object{"nodeAffinity": Object{"requiredDuringSchedulingIgnoredDuringExecution": Object{
		"nodeSelectorTerms": []any{Object{"matchExpressions": []any{expr}}}}}}
}

func meta(o Options, name string, extra Object) Object {
	labels := Object{LabelJob: o.Name}
	for k, v := range o.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	return Object{"name": name, "namespace": o.Namespace, "labels": labels}
}

func mergeLabels(o Options, extra Object) Object {
	return meta(o, "", extra)["labels"].(Object)
}

// mergePatch applies an RFC 7386 JSON merge patch: mappings merge, null
// deletes, anything else replaces; except that the pod spec's lists of
// named items merge by their key, as Kubernetes' strategic merge patch
// merges them (k8s.io/api core/v1's patchMergeKey tags): a patch's
// volumes are added to the scripts' volume, its container "ranks" merges
// into ours (adding volumeMounts, env), rather than replacing them.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	} else {
		t = cloneMap(t)
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if p[k] == nil {
			delete(t, k)
			continue
		}
		if merged, ok := mergeByKey(t[k], p[k], mergeKeys[k]); ok {
			t[k] = merged
			continue
		}
		t[k] = mergePatch(t[k], p[k])
	}
	return t
}

// mergeKeys are the pod spec's lists merged item by item, and the key
// that names an item (k8s.io/api core/v1: PodSpec's containers,
// initContainers, volumes and imagePullSecrets, Container's env and
// volumeMounts).
var mergeKeys = map[string]string{"containers": "name", "initContainers": "name", "volumes": "name",
	"imagePullSecrets": "name", "env": "name", "volumeMounts": "mountPath"}

// mergeByKey merges list patch into list target by key: an item of the
// patch merges into the target's item of the same key (mergePatch), or is
// added. ok is false when they are not both lists of mappings with that
// key (then the patch replaces, as in a JSON merge patch).
func mergeByKey(target, patch any, key string) (any, bool) {
	tl, ok1 := target.([]any)
	pl, ok2 := patch.([]any)
	if key == "" || !ok1 || !ok2 {
		return nil, false
	}
	keyOf := func(item any) (string, bool) {
		m, ok := item.(map[string]any)
		if !ok {
			return "", false
		}
		v, ok := m[key].(string)
		return v, ok
	}
	for _, it := range slices.Concat(tl, pl) {
		if _, ok := keyOf(it); !ok {
			return nil, false
		}
	}
	out := slices.Clone(tl)
	for _, it := range pl {
		k, _ := keyOf(it)
		i := slices.IndexFunc(out, func(o any) bool { name, _ := keyOf(o); return name == k })
		if i < 0 {
			out = append(out, it)
			continue
		}
		out[i] = mergePatch(out[i], it)
	}
	return out, true
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

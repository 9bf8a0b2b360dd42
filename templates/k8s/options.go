package k8s

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// ReadOptions reads Options from a YAML file (--k8s-config): the same
// fields as the flags, in camelCase, and podPatch, a pod spec fragment
// merged over every pod (RFC 7386). Unknown fields are errors.
func ReadOptions(path string) (Options, error) {
	var o Options
	data, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return o, fmt.Errorf("kubernetes options: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("kubernetes options %s: %w", path, err)
	}
	return o, nil
}

// ReadPodPatch reads a pod spec fragment (YAML or JSON) for Options.PodPatch.
func ReadPodPatch(path string) (map[string]any, error) {
	data, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("pod patch: %w", err)
	}
	var p map[string]any
	if err := yaml.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("pod patch %s: %w", path, err)
	}
	if p == nil {
		return nil, fmt.Errorf("pod patch %s: empty; want a mapping of pod spec fields (tolerations:, volumes:, ...)", path)
	}
	return p, nil
}

// ParseLabels reads KEY=VALUE items (--k8s-label); Render checks them.
func ParseLabels(items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: want KEY=VALUE", it)
		}
		out[k] = v
	}
	return out, nil
}

// Over returns o with every field set in flags replacing o's (flags given
// on the command line win over the options file).
func (o Options) Over(flags Options) Options {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set((*string)(&o.Format), string(flags.Format))
	set(&o.Name, flags.Name)
	set(&o.Namespace, flags.Namespace)
	set(&o.Image, flags.Image)
	set(&o.ImagePullPolicy, flags.ImagePullPolicy)
	set(&o.ServiceAccount, flags.ServiceAccount)
	set(&o.PriorityClass, flags.PriorityClass)
	set(&o.Queue, flags.Queue)
	set(&o.SchedulerName, flags.SchedulerName)
	set((*string)(&o.Affinity), string(flags.Affinity))
	set(&o.ProductLabel, flags.ProductLabel)
	set(&o.GPUResource, flags.GPUResource)
	set(&o.Runtime, flags.Runtime)
	for k, v := range flags.Labels {
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[k] = v
	}
	if flags.PodPatch != nil {
		o.PodPatch = flags.PodPatch
	}
	if flags.Control != nil {
		o.Control = flags.Control
	}
	return o
}

// Sources are where a launch's Kubernetes options come from: an options
// file, the flags (which win), labels as KEY=VALUE, a pod patch file, and
// the name used when none is given.
type Sources struct {
	File, PodPatchFile string
	Flags              Options
	Labels             []string
	DefaultName        string
}

// Resolve reads and merges the sources; its errors name the flag.
func (s Sources) Resolve() (Options, error) {
	var o Options
	if s.File != "" {
		var err error
		if o, err = ReadOptions(s.File); err != nil {
			return o, fmt.Errorf("--k8s-config: %w", err)
		}
	}
	f := s.Flags
	labels, err := ParseLabels(s.Labels)
	if err != nil {
		return o, fmt.Errorf("--k8s-label: %w", err)
	}
	f.Labels = labels
	if s.PodPatchFile != "" {
		if f.PodPatch, err = ReadPodPatch(s.PodPatchFile); err != nil {
			return o, fmt.Errorf("--k8s-pod-patch: %w", err)
		}
	}
	o = o.Over(f)
	if o.Name == "" {
		o.Name = s.DefaultName
	}
	return o, nil
}

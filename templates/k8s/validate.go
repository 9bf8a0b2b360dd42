package k8s

import (
	"fmt"
	"regexp"
	"strings"
)

// These follow Kubernetes' own validation (apimachinery's
// validation.IsDNS1123Label, IsDNS1035Label, IsDNS1123Subdomain,
// IsQualifiedName, IsValidLabelValue) and the image reference grammar of
// distribution/reference, so bad input is refused here, before anything is
// applied: the apiserver does not check an image name at all (the pod waits
// in InvalidImageName), and a bad pod template in a JobSet is refused only
// when the controller creates its Jobs.
var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035Label     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedName    = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	secretKey        = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`) // IsConfigMapKey
	labelValue       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	imageRef         = regexp.MustCompile(`^` +
		// optional registry host[:port]/
		`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
		// path components
		`[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*` +
		// :tag and @digest
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`)
)

// checkOptions refuses what Kubernetes would refuse, naming the option.
func checkOptions(o Options) error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	switch o.Format {
	case FormatJobSet, FormatTrainJob:
	default:
		bad("format %q: want jobset or trainjob", o.Format)
	}
	if o.Image == "" {
		bad("image: required (the image holding the training script and its Python)")
	} else if len(o.Image) > 255 || !imageRef.MatchString(o.Image) {
		bad("image %q: not an image reference Kubernetes can pull (want [registry/]name[:tag][@digest], name in lower case)", o.Image)
	}
	if len(o.Name) > 63 || !dns1035Label.MatchString(o.Name) {
		bad("name %q: must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most 63)", o.Name)
	}
	if len(o.Namespace) > 63 || !dns1123Label.MatchString(o.Namespace) {
		bad("namespace %q: must be a DNS-1123 label (lower-case letters, digits and '-', at most 63)", o.Namespace)
	}
	for opt, v := range map[string]string{"service account": o.ServiceAccount, "priority class": o.PriorityClass, "scheduler name": o.SchedulerName} {
		if v != "" && (len(v) > 253 || !dns1123Subdomain.MatchString(v)) {
			bad("%s %q: must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')", opt, v)
		}
	}
	if o.Queue != "" {
		if err := checkLabelValue(o.Queue); err != nil {
			bad("queue %q: %v", o.Queue, err)
		}
	}
	switch o.ImagePullPolicy {
	case "Always", "IfNotPresent", "Never":
	default:
		bad("image pull policy %q: want Always, IfNotPresent or Never", o.ImagePullPolicy)
	}
	switch o.Affinity {
	case AffinityNodeNames, AffinityGPUProduct, AffinityNone:
	default:
		bad("affinity %q: want node-names, gpu-product or none", o.Affinity)
	}
	for _, k := range []string{o.ProductLabel, o.GPUResource} {
		if err := checkLabelKey(k); err != nil {
			bad("%q: %v", k, err)
		}
	}
	for isl, v := range o.GPUProducts {
		if err := checkLabelValue(v); err != nil {
			bad("GPU product of island %s %q: %v", isl, v, err)
		}
	}
	for k, v := range o.Labels {
		if err := checkLabelKey(k); err != nil {
			bad("label %q: %v", k, err)
		}
		if err := checkLabelValue(v); err != nil {
			bad("label %s=%q: %v", k, v, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubernetes: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkLabelKey is a qualified name: [prefix/]name, prefix a DNS subdomain.
func checkLabelKey(k string) error {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok {
		name, prefix = prefix, ""
	} else if prefix == "" || len(prefix) > 253 || !dns1123Subdomain.MatchString(prefix) {
		return fmt.Errorf("prefix %q must be a DNS-1123 subdomain", prefix)
	}
	if name == "" || len(name) > 63 || !qualifiedName.MatchString(name) {
		return fmt.Errorf("name %q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", name)
	}
	return nil
}

func checkLabelValue(v string) error {
	if len(v) > 63 || !labelValue.MatchString(v) {
		return fmt.Errorf("not a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)")
	}
	return nil
}

// checkPodNames refuses a name whose pods' names, their hostname plus the
// Job controller's 6-character suffix, would pass 63 characters (JobSet's
// webhook refuses it at apply; say which option to shorten).
func checkPodNames(o Options, pods []Pod) error {
	for _, p := range pods {
		if len(p.Name)+len("-abcde") > 63 {
			return fmt.Errorf("kubernetes: pod names like %s-xxxxx are longer than 63 characters: give a shorter --k8s-name (now %q) or island name", p.Name, o.Name)
		}
	}
	return nil
}

package resources

import (
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// hole is a security hole of memcached releases, from memcached's own
// history: every release in [from, fixed) has it, when the Memcached runs
// memcached as authOnly says.
type hole struct {
	what        string
	from, fixed release
	// authOnly: only a Memcached with spec.auth (memcached's -Y) runs the
	// code that has the hole.
	authOnly bool
}

// holes are the known holes, by the release that fixed them:
//
//   - 1.6.42 fixed a data race between an auth file reload and a login
//     (memcached 57934a1d0); every rotation of spec.auth is such a reload.
//   - 1.6.43 fixed a reference-count overflow in the binary protocol that
//     its author calls a possible remote code execution (e3b7d33ce). A
//     Memcached without spec.auth accepts the binary protocol; with it,
//     -Y makes memcached speak ASCII alone, so it is listed for all.
//   - 1.6.44 fixed a crash of 1.6.40 to 1.6.43, with auth on, on a few
//     empty lines from a client that has not logged in (af05c9302). For a
//     cache a crash is a flush, so an "upgrade" from 1.6.39 to one of them
//     makes things worse.
var holes = []hole{
	{what: "a data race between an auth reload and a login", fixed: release{1, 6, 42}, authOnly: true},
	{what: "a binary-protocol reference-count overflow, a possible remote code execution", fixed: release{1, 6, 43}},
	{what: "a crash on empty lines sent before login", from: release{1, 6, 40}, fixed: release{1, 6, 44}, authOnly: true},
}

// release is a memcached version: major, minor, patch.
type release [3]int

func (r release) less(o release) bool {
	for i := range r {
		if r[i] != o[i] {
			return r[i] < o[i]
		}
	}
	return false
}

func (r release) String() string {
	return strconv.Itoa(r[0]) + "." + strconv.Itoa(r[1]) + "." + strconv.Itoa(r[2])
}

// releaseTag is a tag that names one memcached release, as the official
// image's tags do: 1.6.39, or with a variant, 1.6.39-alpine.
var releaseTag = regexp.MustCompile(`^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})(-[A-Za-z0-9._-]+)?$`)

// imageRelease returns the memcached release an image reference names by
// its tag, and false when it names none the operator can trust: one pinned
// by digest (the digest decides what runs, whatever the tag says), a
// repository not called memcached (a custom build), no tag (latest) or a
// tag that floats (1.6, alpine).
func imageRelease(image string) (release, bool) {
	if strings.Contains(image, "@") {
		return release{}, false
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon < slash+1 {
		return release{}, false
	}
	if repository := image[slash+1 : colon]; repository != "memcached" {
		return release{}, false
	}
	m := releaseTag.FindStringSubmatch(image[colon+1:])
	if m == nil {
		return release{}, false
	}
	var r release
	for i := range r {
		r[i], _ = strconv.Atoi(m[i+1])
	}
	return r, true
}

// ImageAdvisory says whether spec.image is a memcached release with a
// known security hole, for the ImageVulnerable condition: the status,
// reason and message. The message names each hole and the first release
// that has none of them for this Memcached.
func ImageAdvisory(d Defaulted) (metav1.ConditionStatus, string, string) {
	image := d.Spec.Image
	r, ok := imageRelease(image)
	if !ok {
		return metav1.ConditionUnknown, cachev1beta1.ReasonImageVersionUnknown,
			"Image " + image + " is pinned by digest or its tag is not a memcached release, so the operator cannot tell whether it has known security holes"
	}
	auth := d.Spec.Auth != nil
	var found []string
	var fixed release
	for _, h := range holes {
		if (h.authOnly && !auth) || r.less(h.from) || !r.less(h.fixed) {
			continue
		}
		found = append(found, h.what+" (fixed in "+h.fixed.String()+")")
		if fixed.less(h.fixed) {
			fixed = h.fixed
		}
	}
	if len(found) == 0 {
		return metav1.ConditionFalse, cachev1beta1.ReasonNoKnownVulnerability,
			"memcached " + r.String() + " has no security hole known to this operator"
	}
	// A later release can bring a hole an earlier one did not have (the
	// crash of 1.6.40 to 1.6.43 with auth), so the release to name is the
	// first without any of the holes that apply, not the latest fix of the
	// ones found.
	for _, h := range holes {
		if (!h.authOnly || auth) && !fixed.less(h.from) && fixed.less(h.fixed) {
			fixed = h.fixed
		}
	}
	return metav1.ConditionTrue, cachev1beta1.ReasonKnownVulnerability,
		"memcached " + r.String() + " has known security holes: " + strings.Join(found, "; ") +
			"; set spec.image to memcached " + fixed.String() + " or later (the operator's default is " + cachev1beta1.DefaultImage + ")"
}

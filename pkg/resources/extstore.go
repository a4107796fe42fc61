package resources

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Extstore: with spec.extstore memcached keeps the values that no longer
// fit in -m in a file on a volume, and only their keys and headers in
// memory (memcached's -o ext_path). Each Pod's volume is a generic
// ephemeral volume: the ephemeral volume controller creates the claim
// <pod>-extstore with the Pod, owned by it, and the garbage collector
// deletes it with the Pod. A Deployment can keep such Pods, where a claim
// of its own per Pod would take a StatefulSet; and the tier lives no
// longer than the memory it extends, which memcached empties at every
// start anyway (it truncates the file).
const (
	ExtstoreVolumeName = "extstore"
	// ExtstoreMountPath is where the volume appears in the memcached
	// container, which writes the file ExtstoreFileName in it.
	ExtstoreMountPath = "/var/lib/memcached/extstore"
	ExtstoreFileName  = "data"

	// extstorePageMiB is memcached's ext_page_size, which the operator
	// leaves at its default: memcached fills the file in pages of 64 MiB,
	// and uses only whole ones.
	extstorePageMiB = 64
	// extstoreFilePercent is how much of the volume the file takes. The
	// filesystem keeps the rest: ext4 reserves 5% of its blocks for root
	// by default, which memcached (uid 11211) may not use, and its inode
	// tables and journal take 2 to 3% more. A file that outgrew the free
	// space would fail its writes, and memcached does not check them: the
	// values written would come back as misses.
	extstoreFilePercent = 90
)

// maxExtstoreItemSize is the largest maxItemSize memcached takes with
// extstore: an item must fit one of its write buffers, ext_wbuf_size,
// whose default of 4 MiB the operator keeps.
var maxExtstoreItemSize = resource.MustParse("4Mi")

func extstoreEnabled(s cachev1beta1.MemcachedSpec) bool {
	return s.Extstore != nil
}

// extstoreFileMiB is the size of memcached's extstore file: the share of
// the volume extstoreFilePercent gives, in whole pages.
func extstoreFileMiB(s cachev1beta1.MemcachedSpec) int64 {
	file := s.Extstore.Size.Value() / mebibyte * extstoreFilePercent / 100
	return file - file%extstorePageMiB
}

// extstoreArgs point memcached at the file, sized in MiB (the unit m of
// ext_path's size).
func extstoreArgs(s cachev1beta1.MemcachedSpec) []string {
	return []string{"-o", "ext_path=" + ExtstoreMountPath + "/" + ExtstoreFileName + ":" + strconv.FormatInt(extstoreFileMiB(s), 10) + "m"}
}

// extstoreVolume is the Pod's generic ephemeral volume. Its claim carries
// the pool's labels, the operator's managed-by among them, so that the
// operator's claim informer lists it and the status finds the claims of a
// Memcached by them.
func extstoreVolume(labels map[string]string, s cachev1beta1.MemcachedSpec) *corev1ac.VolumeApplyConfiguration {
	claim := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: s.Extstore.Size}))
	if c := s.Extstore.StorageClassName; c != nil {
		claim.WithStorageClassName(*c)
	}
	return corev1ac.Volume().
		WithName(ExtstoreVolumeName).
		WithEphemeral(corev1ac.EphemeralVolumeSource().
			WithVolumeClaimTemplate(corev1ac.PersistentVolumeClaimTemplate().
				WithLabels(labels).
				WithSpec(claim)))
}

func extstoreVolumeMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(ExtstoreVolumeName).WithMountPath(ExtstoreMountPath)
}

// Memory extstore takes outside -m (see memory.go for the rest):
//
//	extstoreMiB = 32                       write buffers and compaction
//	            + ceil(memoryMiB / 8)      a second hash table share
//	            + ceil(pages * 160 B)      per-page bookkeeping
//
// memcached allocates one 4 MiB write buffer per page bucket (6 buckets
// from 1.6.21 on, 4 before) and one for compaction: 28 MiB at most, 32
// with room to spare. The headers of the items kept on the volume live
// in -m, but they are small: the same -m then indexes several times as
// many items as it holds whole, and the hash table, outside -m, grows
// with their number. Each page of the file costs memcached about 160
// bytes of bookkeeping.
const (
	extstoreBuffersMiB       = 32
	extstoreHashTableDivisor = 8
	extstorePageBytes        = 160
)

// extstoreMemoryMiB is what extstore adds to the container's memory limit,
// 0 without it.
func extstoreMemoryMiB(s cachev1beta1.MemcachedSpec) int64 {
	if !extstoreEnabled(s) {
		return 0
	}
	pages := extstoreFileMiB(s) / extstorePageMiB
	return extstoreBuffersMiB + ceilDiv(int64(memoryMiB(s)), extstoreHashTableDivisor) + ceilDiv(pages*extstorePageBytes, mebibyte)
}

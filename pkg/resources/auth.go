package resources

import (
	"bytes"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Authentication: memcached reads its credentials with -Y from a file in
// an in-memory emptyDir, not from the Secret volume itself, because the
// file it reads must be normalized (see authNormalizeFunc): memcached
// refuses a whole file for one blank or comment line, and before 1.6.32
// (1.6.18, measured) drops the last character of a final entry that has
// no newline. The memcached container's command is a bash wrapper that
// writes the file and then execs memcached with its usual arguments; the
// reloader sidecar rewrites the file when the Secret changes and sends
// memcached SIGHUP, its only way to reload the file, so the Pods share
// their process namespace.
// memcached applies the signal on its one-second clock and keeps the
// items: a rotation never empties the cache.
const (
	// AuthSecretKey is the key of the Secret named by spec.auth that holds
	// the auth file.
	AuthSecretKey = "auth"
	// ReloaderContainerName is the reloader's name when auth is on. It
	// differs from TLSReloaderContainerName because the sidecar then
	// does more than TLS; a Memcached that turns auth on rolls its Pods
	// anyway, while the Pods of one with TLS alone keep theirs unchanged.
	ReloaderContainerName = "reloader"
	// AuthSecretVolumeName and AuthSecretMountPath: the Secret, key auth
	// only, read-only.
	AuthSecretVolumeName = "auth-secret"
	AuthSecretMountPath  = "/etc/memcached/auth-secret"
	// AuthVolumeName and AuthMountPath: the emptyDir that holds the
	// normalized file, AuthFilePath, which memcached reads.
	AuthVolumeName = "auth"
	AuthMountPath  = "/run/memcached-auth"
	AuthFilePath   = AuthMountPath + "/" + AuthSecretKey

	// MaxAuthEntries is how many entries memcached 1.6.18 reads; it
	// silently ignores the rest, so the operator refuses a longer file.
	MaxAuthEntries = 8
	// MaxAuthLineBytes is the longest entry memcached reads whole, without
	// its newline, with every entry after it. memcached (authfile.c, 1.6.18
	// and 1.6.39 alike) reads the file with fgets in pieces of 256 bytes,
	// the last one a terminating NUL, and takes an entry that ends at a
	// NUL for the end of the file: an entry of 254 bytes comes with its
	// newline, one of 255 fills the piece and drops every entry after it.
	MaxAuthLineBytes = 254
)

// authFileSizeLimit bounds the emptyDir, which holds at most 8 entries of
// 255 bytes with their newlines, and a temporary copy.
var authFileSizeLimit = resource.MustParse("64Ki")

// AuthFileProblem says in a few words why the Pods would not hand data,
// the Secret's auth key, to memcached, or "" if they would: the reasons
// are those authNormalizeFunc gives, with the same words, for the same
// file. Lines are numbered as in the Secret, from 1. It is what the
// Secret cache keeps of the key (childcache.Secret), so its result is
// short whatever data holds, and never quotes it.
func AuthFileProblem(data []byte) string {
	// It reads the lines in place: a Secret of a megabyte of newlines is
	// anyone's to write, and a slice of every line would cost it many
	// times over on every event.
	entries, i := 0, 0
	for line := range bytes.Lines(data) {
		i++
		n := strconv.Itoa(i)
		if bytes.IndexByte(line, 0) >= 0 {
			// bash drops NUL bytes as it reads, so the Pod would hand
			// memcached another file than the Secret holds. A NUL in a
			// comment or a blank line counts too: the wrapper finds the
			// first NUL of the file before it reads any line.
			return "a NUL byte in line " + n
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if bytes.IndexByte(line, '\r') >= 0 {
			line = bytes.ReplaceAll(line, []byte("\r"), nil)
		}
		if len(bytes.Trim(line, " \t")) == 0 || line[0] == '#' {
			continue
		}
		switch {
		case bytes.IndexByte(line, ':') < 0:
			return "no ':' on line " + n
		case bytes.ContainsAny(line, " \t\v\f"):
			return "whitespace in line " + n
		case len(line) > MaxAuthLineBytes:
			return "line " + n + " over " + strconv.Itoa(MaxAuthLineBytes) + " bytes"
		}
		if entries++; entries > MaxAuthEntries {
			return "more than " + strconv.Itoa(MaxAuthEntries) + " entries"
		}
	}
	if entries == 0 {
		return "no entry"
	}
	return ""
}

// authNormalizeFunc defines the bash function normalize SRC DST, which
// writes the entries of SRC to DST, one per line with a final newline,
// without carriage returns, blank lines (empty or only spaces and tabs)
// and lines that start with '#'. It writes a temporary file and renames
// it, so memcached never reads half a file. If SRC is a file memcached
// would refuse, or read differently from what it says, it leaves DST as
// it is, prints the reason (AuthFileProblem's words) and fails. The
// temporary file is named for the process that writes it ($BASHPID: the
// wrapper and the reloader may both write at a Pod's start, and the
// kubelet would turn $$ into a lone $). The script that defines it sets
// LC_ALL=C, so that lengths are bytes.
//
// It also defines first_nul FILE, which prints the line of FILE's first
// NUL byte, or 0: bash's read and $(<FILE) drop NUL bytes without a
// word, so normalize looks for them apart, and the reloader compares a
// Secret by its text and that line.
const authNormalizeFunc = `first_nul() {
  local head
  if IFS= read -r -d '' head 2>/dev/null <"$1"; then
    head=${head//[!$'\n']/}
    echo "$((${#head} + 1))"
  else
    echo 0
  fi
}
normalize() {
  local line n=0 entries=0 out= nul
  nul=$(first_nul "$1")
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    if [ "$n" = "$nul" ]; then echo "a NUL byte in line $n"; return 1; fi
    line=${line//$'\r'/}
    [[ $line == *[![:blank:]]* && $line != '#'* ]] || continue
    if [[ $line != *:* ]]; then echo "no ':' on line $n"; return 1; fi
    if [[ $line == *[[:space:]]* ]]; then echo "whitespace in line $n"; return 1; fi
    if [ "${#line}" -gt 254 ]; then echo "line $n over 254 bytes"; return 1; fi
    if [ "$((entries += 1))" -gt 8 ]; then echo "more than 8 entries"; return 1; fi
    out+=$line$'\n'
  done <"$1" || return 1
  if [ "$nul" -gt "$n" ]; then echo "a NUL byte in line $nul"; return 1; fi
  if [ "$entries" = 0 ]; then echo "no entry"; return 1; fi
  printf %s "$out" >"$2.$BASHPID" && mv -f "$2.$BASHPID" "$2"
}
`

// authWrapperScript is the memcached container's command with auth on: it
// writes the auth file and execs memcached, so memcached is the
// container's process as without auth. A Secret that memcached would
// refuse or misread stops the container with the reason instead: without
// it memcached would refuse to start, or start and refuse every client
// (an empty file), or let a user in on the ninth line be refused
// silently. Arguments: the Secret's file, the file to write, then
// memcached's arguments.
const authWrapperScript = `LC_ALL=C
` + authNormalizeFunc + `src=$1 dst=$2
shift 2
if ! reason=$(normalize "$src" "$dst"); then
  echo "$src: ${reason:-cannot be read}; memcached cannot use it" >&2
  exit 1
fi
exec memcached "$@"
`

// reloaderScript is the sidecar's script with auth on, with or without
// TLS. Every interval it first checks that memcached accepts connections
// on its plain port, and does nothing else until it does: before that
// memcached may not handle SIGHUP yet, which would kill it, and the
// wrapper may not have written the file. A Pod's start is such a wait, so
// it is silent until memcached has accepted a connection once, and logged
// after that.
//
// It compares the Secret's auth file (its text and the line of its first
// NUL byte, see first_nul) with the one it last had memcached load; when
// it differs it writes the normalized file, sends memcached SIGHUP, and
// confirms the reload by authenticating with every entry of the new file,
// each on a connection of its own, a few seconds later since memcached
// applies the signal on its one-second clock. The confirmation says that
// every user of the file gets in with its password; it does not say that
// a user removed from the file is refused. It finds memcached in the
// shared process namespace as the process named memcached that reads the
// normalized file. A file the wrapper would refuse is not handed over:
// memcached keeps the credentials it has, and the reloader says why,
// once, and waits for the Secret to change. Each outcome is logged. The
// first round reloads the file the wrapper wrote, which changes nothing,
// so that a Secret changed while memcached was starting is loaded too.
//
// With TLS it also does what tlsReloaderScript does, on a connection it
// first authenticates with the first entry, since memcached refuses every
// command, on every listener, to a connection that has not: it retries
// after any reply that is not OK, and keeps the file that makes the
// container unready (tlsReadinessProbe) while memcached has refused the
// files. The TLS files it compares are its last arguments.
//
// It is plain bash (builtins, /dev/tcp, sleep and mv) for the same
// reasons as tlsReloaderScript, and traps SIGTERM the same way.
//
// Arguments: memcached's plain port on 127.0.0.1, the interval in
// seconds, the Secret's auth file, the normalized file, the TLS directory
// ("" without TLS), the file that says memcached cannot serve TLS, the
// TLS files.
const reloaderScript = `LC_ALL=C
` + authNormalizeFunc + `port=$1 interval=$2 src=$3 dst=$4 dir=$5 down=$6
shift 6
trap 'exit 0' TERM
# login authenticates the connection on fd 3 as the entry $1.
login() {
  local value="${1%%:*} ${1#*:}" reply
  printf 'set auth 0 0 %d\r\n%s\r\n' "${#value}" "$value" >&3 && IFS= read -r -t 5 reply <&3 && [ "${reply%$'\r'}" = STORED ]
}
# confirm authenticates with every entry of dst, each on a connection of
# its own; it prints the user of the first entry memcached refuses.
confirm() {
  local entry
  while IFS= read -r entry; do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port" && login "$entry") 2>/dev/null; then
      echo "${entry%%:*}"
      return 1
    fi
  done <"$dst"
}
# memcached_pid prints the pid of the memcached that reads dst.
memcached_pid() {
  local p comm arg args
  for p in /proc/[0-9]*; do
    { IFS= read -r comm <"$p/comm" && [ "$comm" = memcached ] && mapfile -t -d '' args <"$p/cmdline"; } 2>/dev/null || continue
    for arg in "${args[@]}"; do
      if [ "$arg" = "$dst" ]; then echo "${p#/proc/}"; return 0; fi
    done
  done
  return 1
}
sleep_interval() {
  sleep "$1" &
  wait $!
}
authed= refused= certs= up=
while :; do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    [ -z "$up" ] || echo "memcached does not accept connections on 127.0.0.1:$port; retrying in ${interval}s" >&2
    sleep_interval "$interval"
    continue
  fi
  up=1
  if { secret=$(first_nul "$src"):$(<"$src"); } 2>/dev/null && [ "$secret" != "$authed" ] && [ "$secret" != "$refused" ]; then
    if ! reason=$(normalize "$src" "$dst"); then
      refused=$secret
      echo "$src: ${reason:-cannot be read}; memcached keeps the credentials it has until the Secret is fixed" >&2
    elif ! pid=$(memcached_pid) || ! kill -HUP "$pid"; then
      echo "found no memcached reading $dst to signal; retrying in ${interval}s" >&2
    else
      sleep_interval 2
      for try in 1 2 3; do
        if user=$(confirm); then break; fi
        sleep_interval 1
      done
      if [ -z "$user" ]; then
        authed=$secret
        echo "memcached (pid $pid) loaded the credentials in $src; every user of it authenticates"
      else
        echo "memcached (pid $pid) refused user $user of $src after SIGHUP; retrying in ${interval}s" >&2
      fi
    fi
  fi
  if [ -n "$dir" ] && files=$(for f in "$@"; do c=$(<"$dir/$f") || exit 1; printf '%s\n' "$c"; done) && [ "$files" != "$certs" ]; then
    IFS= read -r entry <"$dst"
    reply=$(exec 2>/dev/null; exec 3<>"/dev/tcp/127.0.0.1/$port" && login "$entry" && printf 'refresh_certs\r\n' >&3 && IFS= read -r -t 5 line <&3 && printf %s "${line%$'\r'}")
    if [ "$reply" = OK ]; then
      certs=$files
      : >"$down"
      echo "memcached loaded the certificate in $dir"
    else
      # Whatever the files hold next round, send them again: a refused
      # pair can leave memcached with no usable certificate, and the
      # pair it last loaded is then no longer loaded.
      certs=
      [ -z "$reply" ] || printf '%s\n' "$reply" >"$down"
      echo "refresh_certs: ${reply:-no answer from 127.0.0.1:$port, or it refused the first credential of $dst}; retrying in ${interval}s" >&2
    fi
  fi
  sleep_interval "$interval"
done
`

func authEnabled(s cachev1beta1.MemcachedSpec) bool {
	return s.Auth != nil
}

// reloaderPort is the port the reloader reaches memcached on at
// 127.0.0.1: the plain loopback port with TLS, spec.port without, where
// memcached listens on every address.
func reloaderPort(s cachev1beta1.MemcachedSpec) int32 {
	if tlsEnabled(s) {
		return LoopbackPort(s)
	}
	return s.Port
}

func authArgs() []string {
	return []string{"-Y", AuthFilePath}
}

// authCommand is the memcached container's command with auth on; its
// arguments stay memcachedArgs.
func authCommand() []string {
	return []string{"bash", "-c", authWrapperScript, MemcachedContainerName, AuthSecretMountPath + "/" + AuthSecretKey, AuthFilePath}
}

func authVolumes(s cachev1beta1.MemcachedSpec) []*corev1ac.VolumeApplyConfiguration {
	return []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().
			WithName(AuthSecretVolumeName).
			WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(s.Auth.SecretName).
				WithItems(corev1ac.KeyToPath().WithKey(AuthSecretKey).WithPath(AuthSecretKey)).
				WithDefaultMode(tlsFileMode)),
		corev1ac.Volume().
			WithName(AuthVolumeName).
			WithEmptyDir(corev1ac.EmptyDirVolumeSource().
				WithMedium(corev1.StorageMediumMemory).
				WithSizeLimit(authFileSizeLimit)),
	}
}

func authVolumeMounts() []*corev1ac.VolumeMountApplyConfiguration {
	return []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(AuthSecretVolumeName).WithMountPath(AuthSecretMountPath).WithReadOnly(true),
		corev1ac.VolumeMount().WithName(AuthVolumeName).WithMountPath(AuthMountPath),
	}
}

// reloaderContainer runs reloaderScript in the memcached image.
func reloaderContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	args := []string{
		strconv.Itoa(int(reloaderPort(s))), strconv.Itoa(TLSReloadIntervalSeconds),
		AuthSecretMountPath + "/" + AuthSecretKey, AuthFilePath, "", "",
	}
	mounts := authVolumeMounts()
	c := corev1ac.Container()
	if tlsEnabled(s) {
		args[4], args[5] = TLSMountPath, TLSRefusedPath
		args = append(args, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		if clientCAEnabled(s) {
			args = append(args, cachev1beta1.ClientCAKey)
		}
		mounts = append(mounts, tlsVolumeMount())
		c.WithReadinessProbe(tlsReadinessProbe())
	}
	return reloaderResources(c.
		WithName(ReloaderContainerName).
		WithImage(s.Image).
		WithCommand("bash", "-c", reloaderScript, ReloaderContainerName).
		WithArgs(args...).
		WithVolumeMounts(mounts...))
}

//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autoui/autoui/aitw"
)

// A private single-node Slurm cluster (Debian's slurm-wlm + munge, which
// `make setup-slurm` installs; startSlurm runs munged, slurmctld and slurmd
// with their own key, config, state and ports under a temporary directory)
// runs `eval run --shard auto` as a 3-task array job; the merged shards must
// score exactly like one unsharded run.
func TestEvalRunShardAutoOnSlurm(t *testing.T) {
	start := time.Now()
	c := startSlurm(t)
	upAt := time.Now()

	dir := t.TempDir()
	bin := buildAutoui(t, filepath.Join(dir, "autoui"))
	builtAt := time.Now()

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "aitw/testdata/records/general")
	outBase := filepath.Join(dir, "out")
	if err := os.MkdirAll(outBase, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
export ORT_DISABLE_TELEMETRY=1
export ONNXRUNTIME_SHARED_LIBRARY_PATH=%s
# The array variables as the task saw them, to check ResolveShard against the real thing.
env | grep '^SLURM_ARRAY_TASK_' > %s/env-$SLURM_ARRAY_TASK_ID
exec %s eval run --model %s --data %s --out %s/shard-$SLURM_ARRAY_TASK_ID --shard auto
`, shellQuote(filepath.Join(root, "third_party/onnxruntime/lib/libonnxruntime.so.1.29.0")), shellQuote(outBase),
		shellQuote(bin), shellQuote(filepath.Join(root, "models/testdata/tiny")), shellQuote(data), shellQuote(outBase))
	// The unsharded run goes meanwhile: sbatch --wait polls every ~10 s anyway.
	single := filepath.Join(dir, "single")
	singleErr := make(chan error, 1)
	go func() {
		singleErr <- runEval(context.Background(), []string{"run", "--model", tinyBundle, "--data", data, "--out", single})
	}()
	jobErr := c.sbatchArray(script, 3)
	jobAt := time.Now()
	if err := <-singleErr; err != nil {
		t.Errorf("unsharded eval run: %v", err)
	}
	if jobErr != nil {
		t.Fatal(jobErr)
	}
	if t.Failed() {
		t.FailNow()
	}

	for i := 0; i < 3; i++ {
		env := readEnvFile(t, filepath.Join(outBase, fmt.Sprintf("env-%d", i)))
		if sh, err := aitw.ResolveShard("auto", 0, env); err != nil || sh != (aitw.Shard{I: i, N: 3}) {
			t.Errorf("task %d: ResolveShard on its environment = %v, %v; want %d/3", i, sh, err, i)
		}
	}

	shards := make([]string, 3)
	for i := range shards {
		shards[i] = filepath.Join(outBase, fmt.Sprintf("shard-%d", i))
	}
	checkDisjointShards(t, shards, single)
	merged := scoreJSON(t, data, shards...)
	want := scoreJSON(t, data, single)
	mergedRun, wantRun := sameRun(merged), sameRun(want)
	if len(mergedRun) == 0 {
		t.Errorf("the merged report has no about.run (the shards' run.json)")
	}
	if !reflect.DeepEqual(merged, want) || !reflect.DeepEqual(mergedRun, wantRun) {
		t.Errorf("eval score of the 3 Slurm shards:\n%s\nrun: %s\nwant (one unsharded run):\n%s\nrun: %s",
			mustJSON(merged), mustJSON(mergedRun), mustJSON(want), mustJSON(wantRun))
	}
	t.Logf("wall time %.1fs: cluster up %.1fs, go build %.1fs, sbatch --wait --array=0-2 (and the unsharded run) %.1fs, checks and scoring %.1fs",
		time.Since(start).Seconds(), upAt.Sub(start).Seconds(), builtAt.Sub(upAt).Seconds(), jobAt.Sub(builtAt).Seconds(),
		time.Since(jobAt).Seconds())
}

// scoreJSON runs `eval score --json` on the prediction directories.
func scoreJSON(t *testing.T, gold string, preds ...string) map[string]any {
	t.Helper()
	args := []string{"score", "--gold", gold, "--json"}
	for _, p := range preds {
		args = append(args, "--pred", p)
	}
	out, err := captureStdout(t, func() error { return runEval(context.Background(), args) })
	if err != nil {
		t.Fatalf("eval %s: %v", strings.Join(args, " "), err)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("eval score --json: %v: %s", err, out)
	}
	return rep
}

// sameRun takes the provenance out of a score report and returns what of it
// must not depend on sharding: the run without its times and shard.
func sameRun(rep map[string]any) map[string]any {
	about, _ := rep["about"].(map[string]any)
	delete(rep, "about") // dates and prediction paths
	run, _ := about["run"].(map[string]any)
	delete(run, "started")
	delete(run, "ended")
	if d, ok := run["data"].(map[string]any); ok {
		delete(d, "shard")
	}
	return run
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// checkDisjointShards checks that every shard predicted some episodes, no
// episode in two shards, and all of them together the unsharded run's.
func checkDisjointShards(t *testing.T, shards []string, single string) {
	t.Helper()
	owner := map[string]string{}
	for _, dir := range shards {
		eps := predictedEpisodes(t, dir)
		if len(eps) == 0 {
			t.Errorf("%s predicted no episodes", dir)
		}
		for ep := range eps {
			if o, ok := owner[ep]; ok {
				t.Errorf("episode %s predicted by both %s and %s", ep, o, dir)
			}
			owner[ep] = dir
		}
	}
	all := predictedEpisodes(t, single)
	for ep := range owner {
		delete(all, ep)
	}
	if len(all) > 0 || len(owner) == 0 {
		t.Errorf("shards predicted %d episodes; the unsharded run %d more", len(owner), len(all))
	}
}

func predictedEpisodes(t *testing.T, dir string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	eps := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p struct {
			EpisodeID string `json:"episode_id"`
		}
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("%s: %v: %q", dir, err, line)
		}
		eps[p.EpisodeID] = true
	}
	return eps
}

// readEnvFile reads `env` output (K=V lines) as a getenv function.
func readEnvFile(t *testing.T, path string) func(string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// buildAutoui builds this command into bin: array tasks run it as a program.
func buildAutoui(t *testing.T, bin string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// slurmCluster is munged, slurmctld and slurmd in a private directory, run
// in the foreground as children of the test: their pids are the test's to
// stop, and the kernel kills them if the test binary dies first.
type slurmCluster struct {
	dir, conf string
	daemons   []*slurmDaemon
}

type slurmDaemon struct {
	name, log, stderr string // log: what to show on failure
	cmd               *exec.Cmd
	exited            chan struct{} // closed once cmd.Wait returned
}

// slurmBins are the programs the cluster needs; root's PATH has /usr/sbin
// but go test may not.
var slurmBins = []string{"munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scancel"}

func slurmBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin"} {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// skipUnlessSlurm skips where the cluster cannot run: not root (munged runs
// as the munge user, slurmd as root) or Slurm not installed. In CI a missing
// install fails instead: there `make test-go` installs it.
func skipUnlessSlurm(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the Slurm cluster needs root (munged runs as the munge user, slurmd as root)")
	}
	for _, b := range slurmBins {
		if _, err := slurmBin(b); err != nil {
			msg := fmt.Sprintf("%v: make setup-slurm (apt-get install slurm-wlm munge)", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// startSlurm brings up the cluster and waits, bounded, for its node to be
// idle; it is torn down when the test ends, pass or fail.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	skipUnlessSlurm(t)
	munge, err := user.Lookup("munge")
	if err != nil {
		t.Fatalf("no munge user (is munge installed?): %v", err)
	}
	// Not t.TempDir: munged, as the munge user, needs to traverse to its socket.
	dir, err := os.MkdirTemp("", "autoui-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // registered first: runs after the daemons stop
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	t.Cleanup(c.stop)
	if err := c.start(munge); err != nil {
		t.Fatalf("start Slurm: %v\n%s", err, c.logTails())
	}
	return c
}

func (c *slurmCluster) start(munge *user.User) error {
	socket, err := c.startMunge(munge)
	if err != nil {
		return err
	}
	if err := c.writeConf(socket); err != nil {
		return err
	}
	if err := c.startDaemon("slurmctld", filepath.Join(c.dir, "slurmctld.log"), nil, "-D", "-f", c.conf); err != nil {
		return err
	}
	if err := c.startDaemon("slurmd", filepath.Join(c.dir, "slurmd.log"), nil, "-D", "-f", c.conf, "-N", slurmNode); err != nil {
		return err
	}
	return c.waitIdle(30 * time.Second)
}

// startMunge runs munged with a fresh key and a private socket; Slurm is
// pointed at the socket, so a system munged (if any) is left alone.
func (c *slurmCluster) startMunge(munge *user.User) (string, error) {
	uid, err := strconv.Atoi(munge.Uid)
	if err != nil {
		return "", fmt.Errorf("munge uid %q: %w", munge.Uid, err)
	}
	gid, err := strconv.Atoi(munge.Gid)
	if err != nil {
		return "", fmt.Errorf("munge gid %q: %w", munge.Gid, err)
	}
	md := filepath.Join(c.dir, "munge")
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.Mkdir(md, 0o755); err != nil { // munged wants its socket's directory world-executable
		return "", err
	}
	if err := os.WriteFile(filepath.Join(md, "munge.key"), key, 0o600); err != nil {
		return "", err
	}
	for _, p := range []string{md, filepath.Join(md, "munge.key")} {
		if err := os.Chown(p, uid, gid); err != nil {
			return "", err
		}
	}
	socket := filepath.Join(md, "munge.socket")
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	// In the foreground munged logs to stderr.
	err = c.startDaemon("munged", "", cred, "-F", "--socket="+socket, "--key-file="+filepath.Join(md, "munge.key"),
		"--pid-file="+filepath.Join(md, "munged.pid"), "--seed-file="+filepath.Join(md, "munged.seed"))
	if err != nil {
		return "", err
	}
	return socket, c.waitFor(10*time.Second, "munged's socket", func() bool {
		_, err := os.Stat(socket)
		return err == nil
	})
}

const slurmNode = "autoui-node"

func (c *slurmCluster) writeConf(mungeSocket string) error {
	// slurmctld runs only on the host named as SlurmctldHost.
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	host, _, _ = strings.Cut(host, ".")
	ctld, err := freePort()
	if err != nil {
		return err
	}
	slurmd, err := freePort()
	if err != nil {
		return err
	}
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	// No cgroups, no accounting, no systemd: what runs in a plain container.
	conf := fmt.Sprintf(`ClusterName=autoui-test
SlurmctldHost=%[7]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MailProg=/bin/true
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d State=UNKNOWN
PartitionName=test Nodes=%[1]s Default=YES MaxTime=30 State=UP
`, slurmNode, ctld, slurmd, mungeSocket, c.dir, runtime.NumCPU(), host)
	return os.WriteFile(c.conf, []byte(conf), 0o644)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *slurmCluster) startDaemon(name, log string, cred *syscall.Credential, args ...string) error {
	bin, err := slurmBin(name)
	if err != nil {
		return err
	}
	stderr, err := os.Create(filepath.Join(c.dir, name+".stderr"))
	if err != nil {
		return err
	}
	defer stderr.Close() // the child has its own copy
	if log == "" {
		log = stderr.Name()
	}
	d := &slurmDaemon{name: name, log: log, stderr: stderr.Name(), exited: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = stderr, stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	c.daemons = append(c.daemons, d)
	return nil
}

// waitFor polls ok until it holds, a daemon exits, or the timeout passes.
func (c *slurmCluster) waitFor(timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		for _, d := range c.daemons {
			if !running(d) {
				return fmt.Errorf("%s exited (%v) while waiting for %s", d.name, d.cmd.ProcessState, what)
			}
		}
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *slurmCluster) waitIdle(timeout time.Duration) error {
	var last string
	err := c.waitFor(timeout, "idle node", func() bool {
		out, _ := c.client(2*time.Second, "sinfo", "-h", "-N", "-o", "%T")
		last = strings.TrimSpace(string(out))
		return last == "idle"
	})
	if err != nil {
		return fmt.Errorf("%w (sinfo: %q)", err, last)
	}
	return nil
}

// client runs a Slurm command against this cluster, killed after timeout.
func (c *slurmCluster) client(timeout time.Duration, name string, args ...string) ([]byte, error) {
	bin, err := slurmBin(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s: no answer in %s", name, timeout)
	}
	return out, err
}

// sbatchArray runs script as an array job of n tasks (0..n-1) and waits for
// it; if a task fails, the error has every task's output and the logs.
func (c *slurmCluster) sbatchArray(script string, n int) error {
	path := filepath.Join(c.dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return err
	}
	out, err := c.client(5*time.Minute, "sbatch", "--wait", fmt.Sprintf("--array=0-%d", n-1), "--time=10",
		"--output="+filepath.Join(c.dir, "task-%a.out"), "--chdir="+c.dir, path)
	if err != nil {
		return fmt.Errorf("sbatch --wait: %v\n%s\n%s%s", err, out, c.taskOutputs(), c.logTails())
	}
	return nil
}

func (c *slurmCluster) taskOutputs() string {
	files, _ := filepath.Glob(filepath.Join(c.dir, "task-*.out"))
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(f), tail(f, 20))
	}
	return b.String()
}

// logTails is the end of each daemon's log and stderr, for failure messages.
func (c *slurmCluster) logTails() string {
	var b strings.Builder
	for _, d := range c.daemons {
		if d.log != d.stderr { // munged's chatter is only worth showing when it died
			fmt.Fprintf(&b, "--- %s log\n%s", d.name, tail(d.log, 15))
		}
		if !running(d) { // it may have died before opening its log
			fmt.Fprintf(&b, "--- %s exited (%v)\n%s", d.name, d.cmd.ProcessState, tail(d.stderr, 15))
		}
	}
	return b.String()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "") + "\n"
}

func running(d *slurmDaemon) bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop cancels leftover jobs (a failed test may leave some), then stops the
// daemons in reverse order: SIGTERM, then SIGKILL after 2 s (slurmd waits
// longer than that for a slurmctld that is gone).
func (c *slurmCluster) stop() {
	if len(c.daemons) == 3 && running(c.daemons[1]) { // slurmctld
		c.client(5*time.Second, "scancel", "--quiet", "--user=root")
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(2 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
}

package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
	"github.com/melbahja/goph"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

// SSHOptions configure how hosts are reached. Zero values mean: user and
// port from ~/.ssh/config else the current user and 22, keys from
// ~/.ssh/config else the default key files, ~/.ssh/known_hosts, 10 s connect
// and 15 s handshake timeouts, a keepalive every 15 s.
type SSHOptions struct {
	User          string
	Port          int
	IdentityFiles []string
	// KnownHostsFile overrides ~/.ssh/known_hosts.
	KnownHostsFile string
	// InsecureIgnoreHostKey skips host key checks (--insecure-skip-host-key-check).
	InsecureIgnoreHostKey bool
	// SSHConfigFile overrides ~/.ssh/config; "none" reads no config.
	SSHConfigFile    string
	ConnectTimeout   time.Duration
	HandshakeTimeout time.Duration
	// KeepAlive is the interval between keepalive@openssh.com requests;
	// negative disables them. A host that answers none of KeepAliveMax
	// (default 3) consecutive requests is declared lost and its connection
	// closed, which ends every session on it.
	KeepAlive    time.Duration
	KeepAliveMax int
}

func (o SSHOptions) WithDefaults() SSHOptions {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 15 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.KeepAliveMax <= 0 {
		o.KeepAliveMax = 3
	}
	return o
}

// UnknownHostKeyError: the host is not in known_hosts.
type UnknownHostKeyError struct {
	Host           string // as looked up in known_hosts (host or [host]:port)
	KnownHostsFile string
	Fingerprint    string
}

func (e *UnknownHostKeyError) Error() string {
	host, port := e.Host, ""
	if h, p, err := net.SplitHostPort(e.Host); err == nil {
		host, port = h, " -p "+p
	}
	return fmt.Sprintf("host key for %s (%s) is not in %s; add it with `ssh-keyscan%s %s >> %s` after checking the fingerprint, or pass --insecure-skip-host-key-check",
		e.Host, e.Fingerprint, e.KnownHostsFile, port, host, e.KnownHostsFile)
}

// HostKeyMismatchError: known_hosts holds a different key for the host.
type HostKeyMismatchError struct {
	Host           string
	KnownHostsFile string
	Fingerprint    string // what the server presented
	Lines          []int  // known_hosts lines with the expected keys
}

func (e *HostKeyMismatchError) Error() string {
	lines := make([]string, len(e.Lines))
	for i, l := range e.Lines {
		lines[i] = strconv.Itoa(l)
	}
	return fmt.Sprintf("HOST KEY MISMATCH for %s: it presented %s, which differs from %s line %s; possible man-in-the-middle; refusing to connect (if the host was reinstalled, remove the old key with `ssh-keygen -R %s -f %s`)",
		e.Host, e.Fingerprint, e.KnownHostsFile, strings.Join(lines, ","), e.Host, e.KnownHostsFile)
}

// ExitError is a remote command that ran and exited non-zero or by signal.
type ExitError struct {
	Host   string
	Code   int    // -1 when killed by a signal
	Signal string // e.g. "TERM"
	Stderr string // last part of stderr, for messages
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("exit code %d", e.Code)
	if e.Signal != "" {
		msg = "killed by signal " + e.Signal
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + lastLine(s)
	}
	return msg
}

// ErrConnLost is returned (wrapped) once keepalives fail or the connection drops.
var ErrConnLost = errors.New("connection lost")

// Conn is one SSH connection to one host, shared by every probe, upload and
// start on that host.
type Conn struct {
	Target HostTarget // as resolved: Addr, User and Port filled in
	client *goph.Client

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error
	done     chan struct{}
	closeMu  sync.Once
}

// resolved is a target after options and ~/.ssh/config are applied.
type resolved struct {
	HostTarget
	identities []string
	knownHosts string // UserKnownHostsFile from ssh config (first one)
}

// Dial connects to target, verifies its host key, authenticates and starts
// keepalives. ctx bounds the whole dial.
func Dial(ctx context.Context, target HostTarget, opts SSHOptions) (*Conn, error) {
	opts = opts.WithDefaults()
	r, err := resolveTarget(target, opts)
	if err != nil {
		return nil, err
	}
	auth, closeAgent, err := authMethods(r.identities, opts.IdentityFiles != nil)
	if err != nil {
		return nil, err
	}
	defer closeAgent()
	hostport := net.JoinHostPort(r.Addr, strconv.Itoa(r.Port))
	cfg := &ssh.ClientConfig{
		User:    r.User,
		Auth:    auth,
		Timeout: opts.ConnectTimeout,
	}
	if opts.InsecureIgnoreHostKey {
		cfg.HostKeyCallback = ssh.InsecureIgnoreHostKey()
	} else {
		// Like OpenSSH, look the key up under the name the user gave
		// (the ssh_config alias, or the cluster file's host name), then
		// under the address dialled: probe records hosts' addresses, and a
		// known_hosts written by ssh-keyscan NAME has only the name.
		cb, algos, err := hostKeyCheck(knownHostsPath(opts, r), lookupNames(r.HostTarget.Name, hostport, r.Port)...)
		if err != nil {
			return nil, err
		}
		cfg.HostKeyCallback, cfg.HostKeyAlgorithms = cb, algos
	}
	client, err := dialHandshake(ctx, hostport, cfg, opts)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		Target: r.HostTarget,
		client: &goph.Client{Client: client, Config: &goph.Config{
			User: r.User, Addr: r.Addr, Port: uint(r.Port), Auth: auth, Timeout: opts.ConnectTimeout,
			Callback: cfg.HostKeyCallback,
		}},
		lost: make(chan struct{}),
		done: make(chan struct{}),
	}
	go c.watch()
	if opts.KeepAlive > 0 {
		go c.keepalive(opts.KeepAlive, opts.KeepAliveMax)
	}
	return c, nil
}

// dialHandshake connects and runs the SSH handshake under a deadline:
// ClientConfig.Timeout covers only the TCP connect, and a host that accepts
// TCP but never speaks SSH would otherwise hang the launcher.
func dialHandshake(ctx context.Context, hostport string, cfg *ssh.ClientConfig, opts SSHOptions) (*ssh.Client, error) {
	d := net.Dialer{Timeout: opts.ConnectTimeout}
	nc, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, dialError(err, opts.ConnectTimeout)
	}
	_ = nc.SetDeadline(time.Now().Add(opts.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	sc, chans, reqs, err := ssh.NewClientConn(nc, hostport, cfg)
	stop()
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("ssh handshake timed out after %s (port open but no SSH answer)", opts.HandshakeTimeout)
		}
		return nil, handshakeError(err)
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// dialError drops the address from net errors so identical failures on
// many hosts fold into one line ("node1, node2: connect: connection refused").
func dialError(err error, timeout time.Duration) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		if oe.Timeout() {
			return fmt.Errorf("connect: no answer within %s (host down, unreachable or firewalled)", timeout)
		}
		if oe.Err != nil {
			return fmt.Errorf("%s: %w", oe.Op, oe.Err)
		}
	}
	return err
}

func handshakeError(err error) error {
	var unk *UnknownHostKeyError
	var mis *HostKeyMismatchError
	if errors.As(err, &unk) {
		return unk
	}
	if errors.As(err, &mis) {
		return mis
	}
	if strings.Contains(err.Error(), "unable to authenticate") {
		return fmt.Errorf("ssh authentication failed (tried agent and keys; check IdentityFile / --identity and the user): %w", err)
	}
	return fmt.Errorf("ssh handshake: %w", err)
}

// resolveTarget applies, in order of precedence: what the target names
// (user@host:port), SSHOptions, ~/.ssh/config, defaults.
func resolveTarget(t HostTarget, opts SSHOptions) (resolved, error) {
	cfg, err := loadSSHConfig(opts.SSHConfigFile)
	if err != nil {
		return resolved{}, err
	}
	get := func(key string) string {
		if cfg == nil {
			return ""
		}
		v, _ := cfg.Get(t.Name, key)
		return v
	}
	r := resolved{HostTarget: t}
	if r.User == "" {
		r.User = opts.User
	}
	if r.User == "" {
		if r.User = get("User"); r.User != "" {
			if err := hostname.CheckUser(r.User); err != nil {
				return r, fmt.Errorf("ssh config: User for %s: %w", t.Name, err)
			}
		}
	}
	if r.User == "" {
		r.User = currentUser()
	}
	if r.Port == 0 {
		r.Port = opts.Port
	}
	if r.Port == 0 {
		if p := get("Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return r, fmt.Errorf("ssh config: Port %q for %s is not a number from 1 to 65535", p, t.Name)
			}
			r.Port = n
		}
	}
	if r.Port == 0 {
		r.Port = 22
	}
	if r.Addr == "" || r.Addr == t.Name {
		r.Addr = t.Name
		if hn := get("HostName"); hn != "" {
			r.Addr = expandTokens(hn, t.Name, r)
			if err := hostname.Check(r.Addr); err != nil {
				return r, fmt.Errorf("ssh config: HostName %q for %s: %w", r.Addr, t.Name, err)
			}
		}
	}
	if kh := strings.Fields(get("UserKnownHostsFile")); len(kh) > 0 && kh[0] != "none" {
		r.knownHosts = expandTokens(kh[0], t.Name, r)
	}
	r.identities = append(r.identities, opts.IdentityFiles...)
	if cfg != nil {
		ids, _ := cfg.GetAll(t.Name, "IdentityFile")
		for _, id := range ids {
			r.identities = append(r.identities, expandTokens(id, t.Name, r))
		}
	}
	return r, nil
}

// expandTokens expands what ssh_config(5) allows in HostName and
// IdentityFile and kevinburke/ssh_config leaves alone: ~, %h, %n, %r, %p, %d, %u, %%.
func expandTokens(s, alias string, r resolved) string {
	home := homeDir()
	if s == "~" || strings.HasPrefix(s, "~/") {
		s = home + s[1:]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			if r.Addr != "" {
				b.WriteString(r.Addr)
			} else {
				b.WriteString(alias)
			}
		case 'n':
			b.WriteString(alias)
		case 'r':
			b.WriteString(r.User)
		case 'p':
			b.WriteString(strconv.Itoa(r.Port))
		case 'd':
			b.WriteString(home)
		case 'u':
			b.WriteString(currentUser())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func loadSSHConfig(file string) (*ssh_config.Config, error) {
	explicit := file != ""
	if file == "none" {
		return nil, nil
	}
	if !explicit {
		file = filepath.Join(homeDir(), ".ssh", "config")
	}
	f, err := inputfile.Open(file)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("ssh config: %w", err)
	}
	defer f.Close()
	c, err := ssh_config.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("ssh config %s: %w", file, err)
	}
	return c, nil
}

// authMethods offers the ssh-agent (when SSH_AUTH_SOCK is set) and then the
// key files: the given ones, or the default ~/.ssh keys that exist. A named
// key that cannot be read is an error; missing default keys are not.
func authMethods(identities []string, explicit bool) ([]ssh.AuthMethod, func(), error) {
	var methods []ssh.AuthMethod
	closeAgent := func() {}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if ac, err := net.Dial("unix", sock); err == nil {
			methods = append(methods, ssh.PublicKeysCallback(agent.NewClient(ac).Signers))
			closeAgent = func() { ac.Close() }
		}
	}
	var signers []ssh.Signer
	if len(identities) == 0 {
		for _, name := range []string{"id_ed25519", "id_rsa", "id_ecdsa"} {
			p := filepath.Join(homeDir(), ".ssh", name)
			if s, err := loadKey(p); err == nil {
				signers = append(signers, s)
			}
		}
	}
	for _, p := range identities {
		s, err := loadKey(p)
		if err != nil {
			if !explicit && errors.Is(err, os.ErrNotExist) {
				continue // IdentityFile in ssh config that does not exist: ssh skips it too
			}
			closeAgent()
			return nil, nil, fmt.Errorf("ssh key %s: %w", p, err)
		}
		signers = append(signers, s)
	}
	if len(signers) > 0 {
		methods = append(methods, ssh.PublicKeys(signers...))
	}
	if len(methods) == 0 {
		closeAgent()
		return nil, nil, fmt.Errorf("no SSH credentials: no ssh-agent (SSH_AUTH_SOCK) and no key in ~/.ssh (id_ed25519, id_rsa, id_ecdsa); pass --identity FILE")
	}
	return methods, closeAgent, nil
}

func loadKey(p string) (ssh.Signer, error) {
	b, err := inputfile.Read(p, limits.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		var pp *ssh.PassphraseMissingError
		if errors.As(err, &pp) {
			return nil, fmt.Errorf("key is passphrase-protected: load it into ssh-agent (ssh-add %s)", p)
		}
		return nil, err
	}
	return s, nil
}

func knownHostsPath(opts SSHOptions, r resolved) string {
	if opts.KnownHostsFile != "" {
		return opts.KnownHostsFile
	}
	if r.knownHosts != "" {
		return r.knownHosts
	}
	return filepath.Join(homeDir(), ".ssh", "known_hosts")
}

var (
	probeKeyOnce sync.Once
	probeKey     ssh.PublicKey
)

// hostKeyCheck returns a callback that tells unknown hosts from changed
// keys, and the host key algorithms known_hosts has for hostport, so the
// server is asked for a key type we can check (golang/go#29286: otherwise
// Go may negotiate another type and report a false mismatch).
// lookupNames are the known_hosts names to try for a connection: the
// target's name with the port, then the address dialled.
func lookupNames(name, hostport string, port int) []string {
	byName := net.JoinHostPort(name, strconv.Itoa(port))
	if name == "" || byName == hostport {
		return []string{hostport}
	}
	return []string{byName, hostport}
}

func hostKeyCheck(file string, hostports ...string) (ssh.HostKeyCallback, []string, error) {
	cb, err := knownhosts.New(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("known_hosts file %s does not exist: create it with `ssh-keyscan HOST >> %s` after checking fingerprints, pass --known-hosts FILE, or --insecure-skip-host-key-check", file, file)
		}
		return nil, nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	// Asking the database about a key no host has lists the keys it does
	// know for this host (the trick skeema/knownhosts uses).
	probeKeyOnce.Do(func() {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		probeKey, _ = ssh.NewPublicKey(pub)
	})
	var algos []string
	seen := map[string]bool{}
	for _, hp := range hostports {
		var ke *knownhosts.KeyError
		if err := cb(hp, &net.TCPAddr{IP: net.IPv4zero}, probeKey); errors.As(err, &ke) {
			for _, k := range ke.Want {
				for _, a := range algorithmsForKeyType(k.Key.Type()) {
					if !seen[a] {
						seen[a] = true
						algos = append(algos, a)
					}
				}
			}
		}
	}
	// The server's own name for itself is ignored: every name in hostports
	// is tried; a key on record that differs is refused at once, and only a
	// host unknown under every name is "unknown".
	check := func(_ string, remote net.Addr, key ssh.PublicKey) error {
		fp := key.Type() + " " + ssh.FingerprintSHA256(key)
		for _, hp := range hostports {
			err := cb(hp, remote, key)
			var ke *knownhosts.KeyError
			switch {
			case err == nil:
				return nil
			case !errors.As(err, &ke):
				return err
			case len(ke.Want) > 0:
				mm := &HostKeyMismatchError{Host: knownhosts.Normalize(hp), KnownHostsFile: file, Fingerprint: fp}
				for _, w := range ke.Want {
					mm.Lines = append(mm.Lines, w.Line)
				}
				return mm
			}
		}
		return &UnknownHostKeyError{Host: knownhosts.Normalize(hostports[0]), KnownHostsFile: file, Fingerprint: fp}
	}
	return check, algos, nil
}

func algorithmsForKeyType(t string) []string {
	switch t {
	case ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	case ssh.CertAlgoRSAv01:
		return []string{ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01}
	}
	return []string{t}
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/"
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// watch records when the connection ends for any reason.
func (c *Conn) watch() {
	err := c.client.Wait()
	c.markLost(fmt.Errorf("%w: %v", ErrConnLost, err))
}

func (c *Conn) markLost(err error) {
	c.lostOnce.Do(func() {
		c.lostErr = err
		close(c.lost)
	})
}

// keepalive sends keepalive@openssh.com requests; when max in a row go
// unanswered the host is lost: the connection is closed so that every
// session on it ends and the supervisor sees it.
func (c *Conn) keepalive(every time.Duration, max int) {
	t := time.NewTicker(every)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.done:
			return
		case <-c.lost:
			return
		case <-t.C:
		}
		select {
		case err := <-c.sendKeepalive():
			if err != nil {
				c.markLost(fmt.Errorf("%w: keepalive: %v", ErrConnLost, err))
				c.client.Close()
				return
			}
			missed = 0
		case <-time.After(every):
			missed++
			if missed >= max {
				c.markLost(fmt.Errorf("%w: no answer to %d keepalives %s apart", ErrConnLost, max, every))
				c.client.Close()
				return
			}
		case <-c.done:
			return
		}
	}
}

// sendKeepalive asks the server for a reply without blocking the caller: a
// dead peer never answers, so callers select on the result with a timeout.
func (c *Conn) sendKeepalive() <-chan error {
	reply := make(chan error, 1)
	go func() {
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		reply <- err
	}()
	return reply
}

// checkAlive returns why the connection is down, asking the server with a
// keepalive when not yet known.
func (c *Conn) checkAlive(timeout time.Duration) error {
	if err := c.Err(); err != nil {
		return err
	}
	select {
	case err := <-c.sendKeepalive():
		if err != nil {
			c.markLost(fmt.Errorf("%w: %v", ErrConnLost, err))
			c.client.Close()
		}
	case <-c.lost:
	case <-time.After(timeout):
		c.markLost(fmt.Errorf("%w: no answer to a keepalive within %s", ErrConnLost, timeout))
		c.client.Close()
	}
	return c.Err()
}

// Lost is closed when the connection has ended (closed, dropped, or
// keepalives unanswered); Err then says why.
func (c *Conn) Lost() <-chan struct{} { return c.lost }

// Err is why the connection ended, nil while it is up.
func (c *Conn) Err() error {
	select {
	case <-c.lost:
		return c.lostErr
	default:
		return nil
	}
}

// Close ends the connection. Remote processes started without a pty keep
// running: stop them first (see Launch).
func (c *Conn) Close() error {
	c.closeMu.Do(func() { close(c.done) })
	c.markLost(fmt.Errorf("%w: closed", ErrConnLost))
	return c.client.Close()
}

// Client exposes the underlying goph client (it embeds *ssh.Client).
func (c *Conn) Client() *goph.Client { return c.client }

// ReachedIPv4 is the IPv4 address this connection reached the host on:
// what sshd there puts in SSH_CONNECTION unless something between rewrites
// addresses. "" for a loopback, IPv6 or unknown address.
func (c *Conn) ReachedIPv4() string {
	a, ok := c.client.RemoteAddr().(*net.TCPAddr)
	if !ok || a.IP.To4() == nil || a.IP.IsLoopback() || a.IP.IsUnspecified() {
		return ""
	}
	return a.IP.String()
}

// Run runs cmd (a shell line: quote its words with shellquote) and returns
// its output. A non-zero exit is an *ExitError. Cancelling ctx closes the
// session; the remote command is not stopped by that (no pty).
func (c *Conn) Run(ctx context.Context, cmd string) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	s, err := c.Start(ctx, cmd, &o, &e)
	if err != nil {
		return nil, nil, err
	}
	err = s.Wait()
	if s.cancelled {
		return nil, nil, err // the output may still be being written
	}
	return o.Bytes(), e.Bytes(), err
}

// RunInput is Run with stdin fed from in.
func (c *Conn) RunInput(ctx context.Context, cmd string, in io.Reader) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	s, err := c.start(ctx, cmd, in, &o, &e, false)
	if err != nil {
		return nil, nil, err
	}
	err = s.Wait()
	if s.cancelled {
		return nil, nil, err
	}
	return o.Bytes(), e.Bytes(), err
}

// Session is a started remote command.
type Session struct {
	conn      *Conn
	sess      *ssh.Session
	stdin     io.WriteCloser
	stderr    *tailBuffer
	done      chan struct{}
	err       error
	stopCtx   func() bool
	ctx       context.Context
	cancelled bool // Wait returned early because ctx was done
}

// Start starts cmd with its output copied to stdout and stderr (either may
// be nil). Its stdin stays open until CloseStdin or the session ends, so a
// remote process can treat EOF on stdin as "the launcher is gone".
func (c *Conn) Start(ctx context.Context, cmd string, stdout, stderr io.Writer) (*Session, error) {
	return c.start(ctx, cmd, nil, stdout, stderr, true)
}

func (c *Conn) start(ctx context.Context, cmd string, in io.Reader, stdout, stderr io.Writer, pipeStdin bool) (*Session, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	sess, err := c.client.NewSession()
	if err != nil {
		if e := c.Err(); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("open session: %w", err)
	}
	s := &Session{conn: c, sess: sess, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	if stdout != nil {
		sess.Stdout = stdout
	}
	if stderr != nil {
		sess.Stderr = io.MultiWriter(stderr, s.stderr)
	} else {
		sess.Stderr = s.stderr
	}
	if in != nil {
		sess.Stdin = in
	} else if pipeStdin {
		if s.stdin, err = sess.StdinPipe(); err != nil {
			sess.Close()
			return nil, err
		}
	}
	if err := sess.Start(cmd); err != nil {
		sess.Close()
		return nil, fmt.Errorf("start %q: %w", cmd, err)
	}
	s.ctx = ctx
	s.stopCtx = context.AfterFunc(ctx, func() { sess.Close() })
	go s.wait()
	return s, nil
}

func (s *Session) wait() {
	err := s.sess.Wait()
	s.stopCtx()
	s.sess.Close()
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		x := &ExitError{Host: s.conn.Target.Name, Code: ee.ExitStatus(), Signal: ee.Signal(), Stderr: s.stderr.String()}
		if x.Signal != "" {
			x.Code = -1
		}
		err = x
	case errors.As(err, &missing), errors.Is(err, io.EOF):
		// Usually the connection went down; the session may notice first.
		if lerr := s.conn.checkAlive(2 * time.Second); lerr != nil {
			err = lerr
		} else {
			err = fmt.Errorf("session ended without exit status (connection closed or command killed)")
		}
	default:
		if lerr := s.conn.Err(); lerr != nil {
			err = lerr
		}
	}
	s.err = err
	close(s.done)
}

// Wait blocks until the command ends or the context given to Start is
// done (then the session is closed, the remote command may still run, and
// the error wraps the context's). A non-zero exit is an *ExitError; a
// dropped connection wraps ErrConnLost.
func (s *Session) Wait() error {
	select {
	case <-s.done:
		return s.err
	case <-s.ctx.Done():
		select {
		case <-s.done:
			return s.err
		default:
		}
		s.sess.Close()
		s.cancelled = true
		return fmt.Errorf("%w (the remote command may still be running)", context.Cause(s.ctx))
	}
}

// Done is closed when the command has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// WriteStdin writes p to the remote command's stdin (sessions from Start).
func (s *Session) WriteStdin(p []byte) error {
	if s.stdin == nil {
		return fmt.Errorf("session has no stdin pipe")
	}
	_, err := s.stdin.Write(p)
	return err
}

// CloseStdin sends EOF to the remote command's stdin.
func (s *Session) CloseStdin() error {
	if s.stdin == nil {
		return nil
	}
	return s.stdin.Close()
}

// Close closes the session channel (does not stop a remote process).
func (s *Session) Close() error { return s.sess.Close() }

// Upload writes content to remotePath (parent directories created) with
// mode, atomically: a partial upload never looks like a complete file. It
// streams over a session's stdin, so it needs no sftp subsystem.
func (c *Conn) Upload(ctx context.Context, content []byte, remotePath string, mode os.FileMode) error {
	// A temp name of its own per upload: hosts sharing the directory (NFS)
	// must not write one temp file; the size check catches a short write.
	// Directories it creates are private (0700, parents too): a job's
	// files directory; one that exists keeps its mode.
	script := fmt.Sprintf(`(umask 077 && mkdir -p %s) && t=$(mktemp %s) && cat >"$t" && [ "$(wc -c <"$t")" -eq %d ] && chmod %04o "$t" && mv -f "$t" %s || { rm -f "$t"; exit 1; }`,
		shellquote.Quote(path.Dir(remotePath)), shellquote.Quote(remotePath+".pipette-tmp.XXXXXX"), len(content),
		mode.Perm(), shellquote.Quote(remotePath))
	_, _, err := c.RunInput(ctx, "exec /bin/sh -c "+shellquote.Quote(script), bytes.NewReader(content))
	if err != nil {
		return fmt.Errorf("upload %s: %w", remotePath, err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// processCPU returns the CPU time (user and system) process pid has used,
// from /proc/PID/stat, or 0 if it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields are counted
	// after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	// /proc reports clock ticks of USER_HZ, 100 per second on Linux.
	return time.Duration(ut+st) * (time.Second / 100)
}

// countFDs returns the number of open descriptors of process pid ("self"
// for this one), from /proc/PID/fd, or -1 if it cannot be read. (Reading
// the directory opens one more, which the count includes for "self".)
func countFDs(pid string) int {
	f, err := os.Open("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(1024)
		n += len(names)
		if err != nil {
			break
		}
	}
	return n
}

// procStatus returns the resident set size in bytes and the thread count
// of process pid, from /proc/PID/status.
func procStatus(pid int) (rss int64, threads int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	var gotRSS, gotThreads bool
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch {
		case k == "VmRSS" && len(f) == 2 && f[1] == "kB":
			kb, perr := strconv.ParseInt(f[0], 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("VmRSS %q: %w", v, perr)
			}
			rss, gotRSS = kb<<10, true
		case k == "Threads" && len(f) == 1:
			n, perr := strconv.Atoi(f[0])
			if perr != nil {
				return 0, 0, fmt.Errorf("Threads %q: %w", v, perr)
			}
			threads, gotThreads = n, true
		}
	}
	if !gotRSS || !gotThreads {
		// A zombie has no VmRSS: the process has exited.
		return 0, 0, fmt.Errorf("process %d: no VmRSS or Threads in its status (exited?)", pid)
	}
	return rss, threads, nil
}

// TCP states in /proc/net/tcp.
const (
	tcpEstablished = "01"
	tcpCloseWait   = "08"
)

// tcpConns counts the TCP sockets of this network namespace whose local
// address is addr and that belong to a process (a socket not accepted yet
// has none), from /proc/net/tcp and /proc/net/tcp6: established ones, the
// connections a server on addr holds open with its clients, and those in
// CLOSE_WAIT, whose client has closed but the server not yet. The address
// is matched whole, never by its port alone: another process's socket may
// have the same port on another address (a client's on ::1, say).
func tcpConns(addr netip.AddrPort) (established, closeWait int, err error) {
	if !addr.IsValid() {
		return 0, 0, fmt.Errorf("no address to count connections of: %v", addr)
	}
	want := procNetAddrs(addr)
	found := false
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, rerr := os.ReadFile(name)
		if rerr != nil {
			continue
		}
		found = true
		for line := range strings.Lines(string(b)) {
			// "sl: local rem st queues tr retrnsmt uid timeout inode
			// ...": the lines of other addresses are passed over
			// before being split.
			_, rest, _ := strings.Cut(line, ": ")
			local, rest, _ := strings.Cut(rest, " ")
			if local != want[0] && local != want[1] {
				continue
			}
			f := strings.Fields(rest) // rem st queues tr retrnsmt uid timeout inode
			if len(f) < 8 || f[7] == "0" {
				continue
			}
			switch f[1] {
			case tcpEstablished:
				established++
			case tcpCloseWait:
				closeWait++
			}
		}
	}
	if !found {
		return 0, 0, errors.New("no /proc/net/tcp")
	}
	return established, closeWait, nil
}

// procNetAddrs returns how /proc/net/tcp and /proc/net/tcp6 write addr as
// a local address: the address's 32-bit words each in the machine's byte
// order (little-endian on the machines this runs on), then the port in
// hex. An IPv4 address has both forms, the second as IPv4-mapped IPv6; an
// IPv6 address has only the second (the first is then never matched).
func procNetAddrs(addr netip.AddrPort) [2]string {
	word := func(b []byte) string {
		return fmt.Sprintf("%02X%02X%02X%02X", b[3], b[2], b[1], b[0])
	}
	port := fmt.Sprintf(":%04X", addr.Port())
	ip := addr.Addr()
	v6 := ip.As16()
	var out [2]string
	if ip.Is4() || ip.Is4In6() {
		v4 := ip.Unmap().As4()
		out[0] = word(v4[:]) + port
		v6 = netip.AddrFrom4(v4).As16() // ::ffff:a.b.c.d
	} else {
		out[0] = "-"
	}
	var b strings.Builder
	for i := 0; i < 16; i += 4 {
		b.WriteString(word(v6[i : i+4]))
	}
	out[1] = b.String() + port
	return out
}

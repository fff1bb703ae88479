package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Peer is the identity of the process at the other end of a connection, as the kernel recorded
// it at connect() (SO_PEERCRED: effective uid and gid).
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}

// String is "uid=U gid=G pid=P", the value of the pod annotation AnnotationAppliedBy.
func (p Peer) String() string { return fmt.Sprintf("uid=%d gid=%d pid=%d", p.UID, p.GID, p.PID) }

// PeerFrom returns the peer credentials of the connection a request came on; ok is false for a
// context that does not come from Server's listener.
func PeerFrom(ctx context.Context) (Peer, bool) {
	info, ok := ctx.Value(peerKey{}).(peerInfo)
	if !ok || info.err != nil {
		return Peer{}, false
	}
	return info.peer, true
}

// errPermission marks refusals (403).
var errPermission = errors.New("permission denied")

// authorize decides whether peer may use the API: root, or a member of the group with the given
// gid by primary gid or by supplementary groups (groups, which may be nil when the primary gid
// already decides). It is pure so it can be table-tested; the caller looks up the groups.
func authorize(peer Peer, groups []uint32, gid uint32, group string) error {
	if peer.UID == 0 || peer.GID == gid || slices.Contains(groups, gid) {
		return nil
	}
	return fmt.Errorf("%w: uid %d is neither root nor in group %q", errPermission, peer.UID, group)
}

// procGroups reads the supplementary groups of pid from <procRoot>/<pid>/status. The Uid: line's
// effective uid must still be uid: if it is not, the pid was reused (or the process changed
// identity) since it connected, and its groups say nothing about the peer.
//
// Why /proc and not SO_PEERGROUPS: the latter is race-free but golang.org/x/sys has no helper
// that reads its binary gid array (GetsockoptString stops at the first NUL byte).
func procGroups(procRoot string, pid int32, uid uint32) ([]uint32, error) {
	path := filepath.Join(procRoot, strconv.Itoa(int(pid)), "status")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("peer groups: %w", err)
	}
	var (
		groups []uint32
		uidOK  bool
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "Uid":
			// real, effective, saved, filesystem
			uidOK = len(fields) >= 2 && fields[1] == strconv.FormatUint(uint64(uid), 10)
		case "Groups":
			for _, f := range fields {
				g, err := strconv.ParseUint(f, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("peer groups: %s: Groups: %q: %w", path, f, err)
				}
				groups = append(groups, uint32(g))
			}
		}
	}
	if !uidOK {
		return nil, fmt.Errorf("peer groups: %s: process no longer runs as uid %d", path, uid)
	}
	return groups, nil
}

// userGroups returns the groups the user database lists for uid: the fallback when the peer's
// pid is not visible here (pid 0: another pid namespace) or has already exited.
func userGroups(uid uint32) ([]uint32, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, fmt.Errorf("peer groups: %w", err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("peer groups of user %s: %w", u.Username, err)
	}
	var groups []uint32
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			groups = append(groups, uint32(g))
		}
	}
	return groups, nil
}

// peerGroups returns peer's supplementary groups: from /proc when the pid is visible, else from
// the user database.
func peerGroups(procRoot string, peer Peer) ([]uint32, error) {
	if peer.PID > 0 {
		groups, err := procGroups(procRoot, peer.PID, peer.UID)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return groups, err
		}
	}
	return userGroups(peer.UID)
}

// lookupGroup resolves a group name to its gid through the user database.
func lookupGroup(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("gid %q: %w", g.Gid, err)
	}
	return uint32(gid), nil
}

package units

import (
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// sd_notify(3) states slicelet sends.
const (
	NotifyReady    = daemon.SdNotifyReady
	NotifyStopping = daemon.SdNotifyStopping
	NotifyWatchdog = daemon.SdNotifyWatchdog
)

// Notify sends state (e.g. NotifyReady, "STATUS=...") to the service manager over
// $NOTIFY_SOCKET. It reports false with a nil error when slicelet does not run under a
// Type=notify unit (no socket), so callers need not check where they run.
func Notify(state string) (bool, error) {
	return daemon.SdNotify(false, state)
}

// WatchdogInterval returns the interval at which WATCHDOG=1 must be sent for this process, or 0
// when systemd expects none (no WatchdogSec=, or the watchdog is meant for another PID).
func WatchdogInterval() (time.Duration, error) {
	return daemon.SdWatchdogEnabled(false)
}

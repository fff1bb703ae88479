package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

// versionOutput is what version -o json|yaml prints, in kubectl version's shape.
type versionOutput struct {
	ClientVersion buildinfo.Info  `json:"clientVersion"`
	ServerVersion *buildinfo.Info `json:"serverVersion,omitempty"`
}

func newVersionCmd(c *cli) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of slicectl and of the running slicelet",
		Long: `Print the version, git commit, build date and Go version of slicectl and, unless --client,
of the running slicelet. When slicelet is not reachable the client's version is printed and the
exit code is 3.`,
		Example: `  slicectl version
  slicectl version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return c.versionCmd(clientOnly)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only the client's version (no daemon needed)")
	return cmd
}

// versionCmd prints the versions; the daemon's error comes after the client's version.
func (c *cli) versionCmd(clientOnly bool) error {
	if err := c.checkOutput("version", "json", "yaml"); err != nil {
		return err
	}
	out := versionOutput{ClientVersion: buildinfo.Get()}
	var serverErr error
	if !clientOnly {
		cl, err := c.client()
		if err != nil {
			return err
		}
		if v, err := cl.Version(c.ctx); err != nil {
			serverErr = err
		} else {
			out.ServerVersion = &v
		}
	}
	switch c.global.output {
	case "json":
		if err := writeJSON(c.stdout, out); err != nil {
			return err
		}
	case "yaml":
		data, err := yaml.Marshal(out)
		if err != nil {
			return fmt.Errorf("yaml output: %w", err)
		}
		if _, err := c.stdout.Write(data); err != nil {
			return err
		}
	default:
		fmt.Fprintf(c.stdout, "Client Version: %s\n", versionLine(out.ClientVersion))
		if out.ServerVersion != nil {
			fmt.Fprintf(c.stdout, "Server Version: %s\n", versionLine(*out.ServerVersion))
		}
	}
	return serverErr
}

// versionLine is one line of version's table: the version with its commit, date and Go.
func versionLine(i buildinfo.Info) string {
	s := i.Version
	if i.GitCommit != "" {
		s += " (commit " + shortCommit(i.GitCommit)
		if i.BuildDate != "" {
			s += ", " + i.BuildDate
		}
		s += ")"
	}
	return s + " " + i.GoVersion + " " + i.Platform
}

// shortCommit is a commit's first 12 characters, keeping a "-dirty" suffix.
func shortCommit(c string) string {
	const n = 12
	if len(c) > n {
		dirty := len(c) > 6 && c[len(c)-6:] == "-dirty"
		c = c[:n]
		if dirty {
			c += "-dirty"
		}
	}
	return c
}

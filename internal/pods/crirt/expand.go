package crirt

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// expand is the kubelet's $(VAR) expansion of env values, commands and args: $(NAME) becomes the
// variable's value when it is defined and stays as written otherwise, $$ is a literal $.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch s[1] {
		case '$':
			b.WriteByte('$')
			s = s[2:]
			continue
		case '(':
			if end := strings.IndexByte(s, ')'); end > 0 {
				if v, ok := vars[s[2:end]]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[:end+1])
				}
				s = s[end+1:]
				continue
			}
		}
		b.WriteByte('$')
		s = s[1:]
	}
	return b.String()
}

// containerEnv expands the container's env values in order (each against those before it) and
// returns them with the command and args expanded against the result.
func containerEnv(c *v1.Container) (env [][2]string, command, args []string) {
	vars := map[string]string{}
	for _, e := range c.Env {
		v := expand(e.Value, vars)
		vars[e.Name] = v
		env = append(env, [2]string{e.Name, v})
	}
	for _, s := range c.Command {
		command = append(command, expand(s, vars))
	}
	for _, s := range c.Args {
		args = append(args, expand(s, vars))
	}
	return env, command, args
}

package lifecycle

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSubPath(t *testing.T) {
	env := []v1.EnvVar{{Name: "POD_NAME", Value: "var-expansion-1"}, {Name: "ANNOTATION", Value: "mypath"}, {Name: "EMPTY"},
		{Name: "UP", Value: ".."}, {Name: "ABS", Value: "/tmp"}}
	tests := []struct {
		name    string
		m       v1.VolumeMount
		want    string
		wantErr string
	}{
		{name: "none", m: v1.VolumeMount{}},
		{name: "subPath", m: v1.VolumeMount{SubPath: "a/b"}, want: "a/b"},
		{name: "subPath is not expanded", m: v1.VolumeMount{SubPath: "$(POD_NAME)"}, want: "$(POD_NAME)"},
		{name: "expression", m: v1.VolumeMount{SubPathExpr: "$(ANNOTATION)/$(POD_NAME)"}, want: "mypath/var-expansion-1"},
		{name: "undefined variable", m: v1.VolumeMount{SubPathExpr: "$(NOPE)/$(POD_NAME)"}, wantErr: "missing value for NOPE"},
		{name: "empty variables, sorted", m: v1.VolumeMount{SubPathExpr: "$(NOPE)/$(EMPTY)/$(NOPE)"}, wantErr: "missing value for EMPTY, NOPE"},
		{name: "backsteps", m: v1.VolumeMount{SubPathExpr: "$(UP)"}, wantErr: "unable to provision SubPath `..`: must not contain '..'"},
		{name: "backsteps inside", m: v1.VolumeMount{SubPath: "a/../../b"}, wantErr: "unable to provision SubPath `a/../../b`: must not contain '..'"},
		{name: "absolute", m: v1.VolumeMount{SubPathExpr: "$(ABS)"}, wantErr: "error SubPath `/tmp` must not be an absolute path"},
		{name: "dots in names are fine", m: v1.VolumeMount{SubPath: "a..b/.c"}, want: "a..b/.c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SubPath(&tt.m, env)
			if (err != nil) != (tt.wantErr != "") || (err != nil && err.Error() != tt.wantErr) || got != tt.want {
				t.Errorf("SubPath = %q, %v; want %q, %q", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

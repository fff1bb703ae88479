package vmtest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// xzMagic starts every xz stream (the .xz file format, section 2.1.1.1).
var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}

// bzImagePayload returns the compressed kernel inside a bzImage and the size
// the kernel says it has once decompressed.
//
// Why: qemu boots a plain ELF vmlinux directly through its PVH entry point,
// which saves the 4–5 s the bzImage's own decompressor takes under TCG
// software emulation. The offsets come from the x86 boot protocol
// (Documentation/arch/x86/boot.rst, protocol ≥ 2.08): payload_offset and
// payload_length at 0x248/0x24c, relative to the protected-mode code that
// starts after (setup_sects+1) sectors of 512 bytes. The build appends the
// decompressed size as a little-endian uint32 to the payload
// (arch/x86/boot/compressed/Makefile, size_append); it is split off here
// because xz rejects trailing bytes that are not stream padding.
func bzImagePayload(img []byte) (payload []byte, size uint32, err error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, 0, errors.New("bzimage: no x86 boot protocol header (HdrS at 0x202)")
	}
	if v := binary.LittleEndian.Uint16(img[0x206:]); v < 0x208 {
		return nil, 0, fmt.Errorf("bzimage: boot protocol %#x: need at least 0x208 for payload_offset", v)
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4 // boot.rst: "if this field is 0, the real value is 4"
	}
	start := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(img[0x248:]))
	length := int(binary.LittleEndian.Uint32(img[0x24c:]))
	if length < len(xzMagic)+4 || start < 0 || start+length > len(img) {
		return nil, 0, fmt.Errorf("bzimage: payload [%d, %d) outside the %d byte image", start, start+length, len(img))
	}
	p := img[start : start+length]
	if !bytes.HasPrefix(p, xzMagic) {
		return nil, 0, fmt.Errorf("bzimage: payload compression with magic % x: only xz is supported", p[:min(len(p), 6)])
	}
	return p[:len(p)-4], binary.LittleEndian.Uint32(p[len(p)-4:]), nil
}

// xenElfnotePhys32Entry is the ELF note type of the PVH entry point
// (xen/include/public/elfnote.h, XEN_ELFNOTE_PHYS32_ENTRY); the kernel emits
// it when built with CONFIG_PVH, and qemu needs it to boot an ELF kernel.
const xenElfnotePhys32Entry = 18

// checkPVH reports an error unless vmlinux is an x86-64 ELF kernel with a
// PVH entry note.
func checkPVH(vmlinux []byte) error {
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		return fmt.Errorf("vmlinux: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("vmlinux: machine %v, want %v", f.Machine, elf.EM_X86_64)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes := make([]byte, p.Filesz)
		if _, err := p.ReadAt(notes, 0); err != nil {
			return fmt.Errorf("vmlinux: note segment: %w", err)
		}
		for len(notes) >= 12 {
			namesz := int(binary.LittleEndian.Uint32(notes[0:]))
			descsz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			name := notes[12:min(len(notes), 12+namesz)]
			if typ == xenElfnotePhys32Entry && string(bytes.TrimRight(name, "\x00")) == "Xen" {
				return nil
			}
			next := 12 + align4(namesz) + align4(descsz)
			if next > len(notes) {
				break
			}
			notes = notes[next:]
		}
	}
	return errors.New("vmlinux: no PVH entry note (kernel built without CONFIG_PVH): qemu cannot boot it")
}

func align4(n int) int { return (n + 3) &^ 3 }

// moduleInfo is what the initramfs needs to know about one kernel module.
type moduleInfo struct {
	Name    string   // module name with '-' normalised to '_'
	Depends []string // names of the modules it needs loaded first
}

// normModule normalises a module name the way the kernel does: '-' and '_'
// are the same character in module names.
func normModule(name string) string { return strings.ReplaceAll(name, "-", "_") }

// readModuleInfo reads the name and dependencies of a kernel module from its
// .modinfo section ("key=value" strings separated by NUL bytes). depmod and
// modprobe do the same; this host has no kmod, and busybox insmod loads
// exactly one file, so the initramfs has to load modules in dependency order
// itself.
func readModuleInfo(file string, ko []byte) (moduleInfo, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return moduleInfo{}, fmt.Errorf("module %s: %w", file, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return moduleInfo{}, fmt.Errorf("module %s: no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return moduleInfo{}, fmt.Errorf("module %s: .modinfo: %w", file, err)
	}
	mi := moduleInfo{Name: normModule(strings.TrimSuffix(baseName(file), ".ko"))}
	for kv := range strings.SplitSeq(string(data), "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.Name = normModule(v)
		case "depends":
			for d := range strings.SplitSeq(v, ",") {
				if d != "" {
					mi.Depends = append(mi.Depends, normModule(d))
				}
			}
		}
	}
	return mi, nil
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// moduleLoadOrder returns every module of mods ordered so that each comes
// after the modules it depends on; ties keep the order of mods. It fails on a
// dependency missing from mods or a dependency cycle.
func moduleLoadOrder(mods []moduleInfo) ([]string, error) {
	byName := make(map[string]moduleInfo, len(mods))
	for _, m := range mods {
		byName[m.Name] = m
	}
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int, len(mods))
	var order []string
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(path, name), " -> "))
		}
		m, ok := byName[name]
		if !ok {
			return fmt.Errorf("module %s: needed by %s but not in the module list", name, path[len(path)-1])
		}
		state[name] = visiting
		for _, d := range m.Depends {
			if err := visit(d, append(slices.Clip(path), name)); err != nil {
				return err
			}
		}
		state[name] = done
		order = append(order, name)
		return nil
	}
	for _, m := range mods {
		if err := visit(m.Name, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// missingDepends returns the dependencies of mods that are not in mods
// themselves, sorted and without duplicates.
func missingDepends(mods []moduleInfo) []string {
	have := make(map[string]bool, len(mods))
	for _, m := range mods {
		have[m.Name] = true
	}
	var miss []string
	for _, m := range mods {
		for _, d := range m.Depends {
			if !have[d] && !slices.Contains(miss, d) {
				miss = append(miss, d)
			}
		}
	}
	slices.Sort(miss)
	return miss
}

// parseKernelDepends picks the linux-image package out of the output of
// "apt-cache depends linux-image-amd64".
func parseKernelDepends(out []byte) (string, error) {
	for line := range strings.SplitSeq(string(out), "\n") {
		dep, ok := strings.CutPrefix(strings.TrimSpace(line), "Depends: ")
		if ok && strings.HasPrefix(dep, "linux-image-") && !strings.ContainsAny(dep, "<> ") {
			return dep, nil
		}
	}
	return "", fmt.Errorf("vm kernel: no linux-image-* dependency in apt-cache depends linux-image-amd64: %q", out)
}

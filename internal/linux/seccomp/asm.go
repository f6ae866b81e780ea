package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// assembler collects BPF instructions whose jump targets are labels and
// resolves them to the relative offsets classic BPF wants. It exists so
// the program is written as straight-line code with names rather than
// hand-counted skips, which is where filters usually go wrong.
type assembler struct {
	items  []asmItem
	labels map[string]int // label → index of the next instruction
	err    error
	n      int // for uniqueLabel
}

type asmItem struct {
	ins bpf.Instruction
	// For conditional jumps: labels for the true and false branches;
	// "" means fall through to the next instruction.
	jt, jf string
	// For an unconditional jump: its target.
	ja string
}

func newAssembler() *assembler {
	return &assembler{labels: make(map[string]int)}
}

func (a *assembler) label(name string) {
	if _, dup := a.labels[name]; dup && a.err == nil {
		a.err = fmt.Errorf("duplicate label %q", name)
	}
	a.labels[name] = len(a.items)
}

// uniqueLabel returns a label name not used before, for matchers that
// need a target of their own.
func (a *assembler) uniqueLabel(prefix string) string {
	a.n++
	return fmt.Sprintf(".%s%d", prefix, a.n)
}

func (a *assembler) add(ins bpf.Instruction) {
	a.items = append(a.items, asmItem{ins: ins})
}

// loadWord loads the 32-bit word at off in struct seccomp_data.
func (a *assembler) loadWord(off uint32) {
	a.add(bpf.LoadAbsolute{Off: off, Size: 4})
}

// jumpIf compares the accumulator with val and goes to jt or jf.
func (a *assembler) jumpIf(cond bpf.JumpTest, val uint32, jt, jf string) {
	a.items = append(a.items, asmItem{ins: bpf.JumpIf{Cond: cond, Val: val}, jt: jt, jf: jf})
}

// jump goes to the label unconditionally.
func (a *assembler) jump(to string) {
	a.items = append(a.items, asmItem{ins: bpf.Jump{}, ja: to})
}

func (a *assembler) ret(act Action) {
	a.add(bpf.RetConstant{Val: uint32(act)})
}

// assemble resolves the labels and encodes the program.
func (a *assembler) assemble() ([]bpf.RawInstruction, error) {
	if a.err != nil {
		return nil, a.err
	}
	skip := func(from int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok {
			return 0, fmt.Errorf("undefined label %q", name)
		}
		d := to - (from + 1)
		// Classic BPF only jumps forward, at most 255 instructions.
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("jump from %d to label %q (%d) out of range", from, name, to)
		}
		return uint8(d), nil
	}
	out := make([]bpf.RawInstruction, 0, len(a.items))
	for i, it := range a.items {
		ins := it.ins
		if j, ok := ins.(bpf.JumpIf); ok {
			var err error
			if j.SkipTrue, err = skip(i, it.jt); err != nil {
				return nil, err
			}
			if j.SkipFalse, err = skip(i, it.jf); err != nil {
				return nil, err
			}
			ins = j
		}
		if j, ok := ins.(bpf.Jump); ok {
			if it.ja == "" {
				return nil, fmt.Errorf("instruction %d: jump without a target", i)
			}
			to, ok := a.labels[it.ja]
			if !ok {
				return nil, fmt.Errorf("undefined label %q", it.ja)
			}
			if to <= i {
				return nil, fmt.Errorf("jump from %d to label %q (%d) goes backwards", i, it.ja, to)
			}
			j.Skip = uint32(to - (i + 1))
			ins = j
		}
		raw, err := ins.Assemble()
		if err != nil {
			return nil, fmt.Errorf("instruction %d (%v): %w", i, ins, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

# Sourced by the Hugging Face interop scripts: agree NAME EVAL_LINE NUMPY_LOSS passes when Strata's
# `eval_loss=<value>` line and the NumPy reference's loss agree to 1e-5 relative. Needs $python.
agree() {
  "$python" - "$1" "$2" "$3" <<'PY'
import sys
name, strata, numpy_loss = sys.argv[1], float(sys.argv[2].split("=")[1]), float(sys.argv[3])
difference = abs(strata - numpy_loss) / numpy_loss
print(f"{name}: strata eval {strata:.6f}, numpy {numpy_loss:.6f}, relative difference {difference:.2e}")
assert difference < 1e-5, "the two models disagree"
PY
}

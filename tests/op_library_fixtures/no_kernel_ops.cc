// Refused: an op without any kernel.
#include "opforge/opforge.h"

namespace opforge {
REGISTER_OP("KernelLess").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("Declared only.\n\nx: In.\ny: Out.");
}  // namespace opforge

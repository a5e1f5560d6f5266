// Everything a custom-op author needs.
#pragma once

#include "opforge/attr.h"
#include "opforge/dtype.h"
#include "opforge/kernel.h"
#include "opforge/op.h"
#include "opforge/parallel.h"
#include "opforge/registry.h"
#include "opforge/resource.h"
#include "opforge/shape_inference.h"
#include "opforge/stamp.h"
#include "opforge/status.h"
#include "opforge/tensor.h"

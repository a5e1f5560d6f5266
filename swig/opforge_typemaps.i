// All typemaps live here. The generated entry points take inputs as
// PyObject* (converted together, so scalars can follow a partner's dtype)
// and each attr as an opforge::py::*Attr, converted by ConvertAttr with the
// op ($symname) and attr ($1_name) named in any error.

%define OPFORGE_ATTR_TYPEMAP(TYPE)
%typemap(in) opforge::py::TYPE {
  if (!opforge::py::ConvertAttr($input, "$symname", "$1_name", &$1)) SWIG_fail;
}
%typemap(typecheck) opforge::py::TYPE "$1 = 1;";
%enddef

OPFORGE_ATTR_TYPEMAP(IntAttr)
OPFORGE_ATTR_TYPEMAP(FloatAttr)
OPFORGE_ATTR_TYPEMAP(BoolAttr)
OPFORGE_ATTR_TYPEMAP(StringAttr)
OPFORGE_ATTR_TYPEMAP(TypeAttr)
OPFORGE_ATTR_TYPEMAP(ShapeAttr)
OPFORGE_ATTR_TYPEMAP(IntListAttr)
OPFORGE_ATTR_TYPEMAP(FloatListAttr)
OPFORGE_ATTR_TYPEMAP(TypeListAttr)

// Results are already new references (a Tensor, a tuple, None) or NULL with
// an opforge.errors exception set.
%typemap(out) PyObject* {
  if (!$1) SWIG_fail;
  $result = $1;
}

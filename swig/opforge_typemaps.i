// All typemaps live here. The generated entry points take every parameter
// as PyObject* and hand them to the call path (py_call.h), which converts
// them together: inputs by the binder (scalars follow a partner's dtype),
// attrs by their declared type (ConvertAnyAttr).

// Results are already new references (a Tensor, a tuple, None) or NULL with
// an opforge.errors exception set.
%typemap(out) PyObject* {
  if (!$1) SWIG_fail;
  $result = $1;
}

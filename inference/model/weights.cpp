// Binding tensors to Linear layers (see weights.h).
#include "inference/model/weights.h"

#include "inference/model/weight_formats.h"

namespace cubeforge {

Result<cpu::WeightMatrix> WeightBinder::matrix(const std::string& name) const {
  const SafetensorsFile& file = converted_ && converted_->contains(name) ? *converted_ : file_;
  if (holds_quantized(file, name)) return bind_quantized(file, name);
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file.get(name));
  if (view.shape().size() != 2 || !dtype_is_float(view.dtype()))
    return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': tensor '" + name + "' is not a float matrix");
  CUBEFORGE_TRY(check_element_aligned(view, file.name()));
  return cpu::WeightMatrix{view.dtype(), view.data, view.shape()[0], view.shape()[1]};
}

Result<Linear> WeightBinder::linear(const std::string& prefix, bool with_bias) const {
  Linear layer;
  CUBEFORGE_ASSIGN_OR_RETURN(layer.weight, matrix(prefix + ".weight"));
  if (with_bias) {
    CUBEFORGE_ASSIGN_OR_RETURN(layer.bias, vector(prefix + ".bias"));
  }
  return layer;
}

}  // namespace cubeforge

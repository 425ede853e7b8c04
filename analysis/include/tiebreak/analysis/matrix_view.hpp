// SPDX-License-Identifier: Apache-2.0
/// @file A non-owning strided view of a dense float or double matrix, shared by the analyses.
#pragma once

#include <Eigen/Core>

#include <cassert>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace tiebreak::analysis {

using index = Eigen::Index;

/// A read-only view of a rows × cols matrix whose element (i, j) is
/// `data[i * row_stride + j * col_stride]`. Row-major contiguous storage has col_stride == 1,
/// column-major has row_stride == 1. T is float or double. The view does not own the memory.
template <class T>
struct matrix_view {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const T* data = nullptr;
  index rows = 0;
  index cols = 0;
  index row_stride = 0;
  index col_stride = 0;

  [[nodiscard]] T operator()(index i, index j) const { return data[i * row_stride + j * col_stride]; }

  /// Rows [first, first + count). Precondition: 0 <= first, first + count <= rows.
  [[nodiscard]] matrix_view block_rows(index first, index count) const {
    assert(first >= 0 && count >= 0 && first + count <= rows);
    return {data + first * row_stride, count, cols, row_stride, col_stride};
  }
  /// Columns [first, first + count). Precondition: 0 <= first, first + count <= cols.
  [[nodiscard]] matrix_view block_cols(index first, index count) const {
    assert(first >= 0 && count >= 0 && first + count <= cols);
    return {data + first * col_stride, rows, count, row_stride, col_stride};
  }
  /// The transpose, without copying.
  [[nodiscard]] matrix_view transposed() const { return {data, cols, rows, col_stride, row_stride}; }

  /// A dense double copy (column-major), for the routines that use Eigen decompositions.
  [[nodiscard]] Eigen::MatrixXd to_matrix() const {
    Eigen::MatrixXd out(rows, cols);
    for (index j = 0; j < cols; ++j)
      for (index i = 0; i < rows; ++i) out(i, j) = static_cast<double>((*this)(i, j));
    return out;
  }
};

/// View of a contiguous row-major rows × cols array (the layout of a C-order .npy matrix).
template <class T>
[[nodiscard]] matrix_view<T> row_major_view(const T* data, index rows, index cols) {
  return {data, rows, cols, cols, 1};
}

/// View of an Eigen expression with direct access (Matrix, Map, Block, Ref). The expression must
/// outlive the view.
template <class Derived>
  requires((Derived::Flags & Eigen::DirectAccessBit) != 0)
[[nodiscard]] auto view_of(const Eigen::DenseBase<Derived>& m) {
  using T = typename Derived::Scalar;
  const Derived& d = m.derived();
  const index inner = d.innerStride();
  const index outer = d.outerStride();
  if constexpr (Derived::IsRowMajor)
    return matrix_view<T>{d.data(), d.rows(), d.cols(), outer, inner};
  else
    return matrix_view<T>{d.data(), d.rows(), d.cols(), inner, outer};
}

/// Splits `m` into consecutive blocks of `rows_per_slice` rows (per-head blocks of a PyTorch
/// [out, in] weight such as W_Q). Precondition: rows_per_slice > 0 divides m.rows.
template <class T>
[[nodiscard]] std::vector<matrix_view<T>> split_rows(matrix_view<T> m, index rows_per_slice) {
  std::vector<matrix_view<T>> out;
  for (index r = 0; r + rows_per_slice <= m.rows; r += rows_per_slice)
    out.push_back(m.block_rows(r, rows_per_slice));
  return out;
}

/// Splits `m` into consecutive blocks of `cols_per_slice` columns.
/// Precondition: cols_per_slice > 0 divides m.cols.
template <class T>
[[nodiscard]] std::vector<matrix_view<T>> split_cols(matrix_view<T> m, index cols_per_slice) {
  std::vector<matrix_view<T>> out;
  for (index c = 0; c + cols_per_slice <= m.cols; c += cols_per_slice)
    out.push_back(m.block_cols(c, cols_per_slice));
  return out;
}

}  // namespace tiebreak::analysis

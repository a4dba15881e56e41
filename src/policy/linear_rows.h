// The rows of a linear program being built for CBC, in the form
// OsiSolverInterface::loadProblem takes: a row-wise matrix and each row's
// bounds. The programs solved with CBC (autoscaling_ilp.cc,
// allocation_milp.cc) build their constraints with it.
//
// Thread-safety: a value type; not synchronised.
#pragma once

#include <limits>
#include <vector>

#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>

namespace maitre::policy {

class LinearRows {
 public:
  // An unbounded side of a row.
  static constexpr double kInfinity = std::numeric_limits<double>::max();

  explicit LinearRows(int columns) : matrix_(false, 0, 0) { matrix_.setDimensions(0, columns); }

  // lower <= row · x <= upper.
  void Add(const CoinPackedVector& row, double lower, double upper) {
    matrix_.appendRow(row);
    lower_.push_back(lower);
    upper_.push_back(upper);
  }

  const CoinPackedMatrix& matrix() const { return matrix_; }
  const double* lower() const { return lower_.data(); }
  const double* upper() const { return upper_.data(); }

 private:
  CoinPackedMatrix matrix_;
  std::vector<double> lower_, upper_;
};

}  // namespace maitre::policy

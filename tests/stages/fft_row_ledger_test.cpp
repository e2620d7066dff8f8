// RowLedger alone: which input a row stands for, and which rows an input gap marks.
#include <gtest/gtest.h>

#include "stages/fft/row_ledger.hpp"

namespace sluice {
namespace {

Chunk input_chunk(std::uint64_t first_sample, std::uint64_t samples) {
  Chunk chunk;
  chunk.first_sample = first_sample;
  chunk.sample_count = samples;
  chunk.timestamp = Timestamp{100, 0, true};
  return chunk;
}

TEST(RowLedger, FramesFollowTheirChunksAcrossALoss) {
  RowLedger ledger;
  ledger.start(4, 1, 1e6);
  const Chunk first = input_chunk(0, 6);
  ledger.note_chunk(first);
  ledger.note_load(first, 0, 0);
  Chunk after_loss = input_chunk(10, 6);  // samples 6..9 were lost before it
  after_loss.add_gap(6, 4);
  ledger.note_chunk(after_loss);
  ledger.note_load(after_loss, 0, 6);
  // Frame 1 holds batch positions 4..7: input samples 4, 5, then 10, 11.
  const RowLedger::FrameInfo frame = ledger.frame_info(1);
  EXPECT_EQ(frame.first_sample, 4U);
  EXPECT_EQ(frame.end_sample, 12U);
  EXPECT_EQ(ledger.frame_info(2).first_sample, 12U);
  // 1 µs a sample: frame 2 starts 2 samples into the second chunk.
  EXPECT_EQ(ledger.time_of(ledger.frame_info(2)).picoseconds, 2'000'000U);
}

TEST(RowLedger, AGapMarksTheRowsItTouchesAndNoOther) {
  RowLedger ledger;
  ledger.start(4, 1, 1e6);
  const Chunk first = input_chunk(0, 8);
  ledger.note_chunk(first);
  ledger.note_load(first, 0, 0);
  Chunk after_loss = input_chunk(12, 8);  // samples 8..11 lost: between frame 1 and frame 2
  after_loss.add_gap(8, 4);
  ledger.note_chunk(after_loss);
  ledger.note_load(after_loss, 0, 8);
  Chunk out;
  bool marked = true;
  ASSERT_TRUE(ledger.mark_row(ledger.frame_info(0), out, 0, marked));
  EXPECT_FALSE(marked);
  ASSERT_TRUE(ledger.mark_row(ledger.frame_info(1), out, 4, marked));
  EXPECT_FALSE(marked);
  // The row after the hole owns it (input 8..15 is its share): marked, as a gap over its values.
  ASSERT_TRUE(ledger.mark_row(ledger.frame_info(2), out, 8, marked));
  EXPECT_TRUE(marked);
  ASSERT_EQ(out.gap_count, 1U);
  EXPECT_EQ(out.gaps[0].first_sample, 8U);
  EXPECT_EQ(out.gaps[0].length, 4U);
  EXPECT_TRUE(out.gaps[0].in_data);
  EXPECT_TRUE(ledger.quiet());
  ASSERT_TRUE(ledger.mark_row(ledger.frame_info(3), out, 12, marked));
  EXPECT_FALSE(marked);
}

TEST(RowLedger, ARowWhoseGapDoesNotFitChangesNothing) {
  RowLedger ledger;
  ledger.start(4, 1, 1e6);
  Chunk input = input_chunk(4, 8);
  input.add_gap(0, 4);  // lost just ahead of the first sample
  ledger.note_chunk(input);
  ledger.note_load(input, 0, 0);
  Chunk out;
  for (std::uint64_t i = 0; i < Chunk::kMaxGaps; ++i) out.add_gap(1000 + 10 * i, 1, true);
  bool marked = false;
  EXPECT_FALSE(ledger.mark_row(ledger.frame_info(0), out, 0, marked));
  EXPECT_FALSE(ledger.quiet());  // the gap still waits for the row that takes it
  Chunk next_out;
  ASSERT_TRUE(ledger.mark_row(ledger.frame_info(0), next_out, 0, marked));
  EXPECT_TRUE(marked);
}

TEST(RowLedger, ARetuneIsReachedByTheFirstRowWhollyAfterIt) {
  RowLedger ledger;
  ledger.start(4, 1, 1e6);
  Chunk input = input_chunk(0, 8);
  ledger.note_chunk(input);
  ledger.note_load(input, 0, 0);
  Chunk retuned = input_chunk(8, 8);
  retuned.context_change = true;
  retuned.context.rf_frequency = 2.4e9;
  ledger.note_chunk(retuned);
  ledger.note_load(retuned, 0, 8);
  EXPECT_FALSE(ledger.change_reached(ledger.frame_info(1).first_sample));
  EXPECT_TRUE(ledger.change_reached(ledger.frame_info(2).first_sample));
  EXPECT_EQ(ledger.take_change().rf_frequency, 2.4e9);
  EXPECT_FALSE(ledger.change_reached(ledger.frame_info(2).first_sample));
}

}  // namespace
}  // namespace sluice

"""The reference learner: the learnable side of the exam's gate.

An exam ranks agents only if it is closed to rules (the model-free side: `exam_builder.quality`)
and open to learning. This package measures the second side. For each family of a bank it
trains the starter's own model (`toolkit/starter/model.py`) on in-format text that the family's
generator makes from seeds disjoint from the exam's (the best an agent that had
reverse-engineered the format could do), exports it as a starter bundle, and grades that bundle
with the real grader on the family's questions of the exam.

- `corpus`: the in-format training text, with a weight per byte (answers count, masks never);
- `scale`: the sizes and times of a scale (`cpu`: the gate's, minutes on two cores; `gpu`: the
  track's preset on one GPU);
- `trainer`: the training loop;
- `reference`: a family trained, exported and graded; the table of a whole exam.

`toolkit learn-exam` is the command; `toolkit build-exam --learn` runs it after a build.
Maintainers' guide: site/docs/maintainers/exams.md ("Both sides of the gate").
"""

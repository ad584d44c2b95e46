"""What ships: the student release, its notebook, Gradescope's autograder and the Classroom workflow."""

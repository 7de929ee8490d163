-- Room on each page for the next version of a row, so that a heartbeat's new version lands on the
-- same page (a HOT update). Only pages written from now on keep the room; SHARE UPDATE EXCLUSIVE,
-- so reads and writes go on.
ALTER TABLE huddle_participants SET (fillfactor = 80);

#!/usr/bin/env ruby
# Producer/worker scenario through beaneater, a real beanstalk client library.
#
#   ruby tests/integration/client_beaneater.rb 127.0.0.1:11300
#
# Talks to the server only through the library's API (tubes, jobs, stats),
# so it checks what such a client relies on: reply parsing, YAML that the
# library can load, key names and order, priorities, delays, TTR, bury/kick,
# pause, errors mapped to the library's exceptions, and the library's own
# worker loop (Jobs#process!).  Tube names carry the pid, so the script can
# also run against a server that is in use.  Exits 0 only if every check
# passed; the last line is `beaneater: N passed, N failed`.

require 'beaneater'
require 'timeout'

ADDR = ARGV[0] || ENV['BEANSTALKD_URL']
abort("usage: client_beaneater.rb HOST:PORT") unless ADDR

STATS_KEYS = %w(current-jobs-urgent current-jobs-ready current-jobs-reserved
  current-jobs-delayed current-jobs-buried cmd-put cmd-peek cmd-peek-ready
  cmd-peek-delayed cmd-peek-buried cmd-reserve cmd-reserve-with-timeout
  cmd-delete cmd-release cmd-use cmd-watch cmd-ignore cmd-bury cmd-kick
  cmd-touch cmd-stats cmd-stats-job cmd-stats-tube cmd-list-tubes
  cmd-list-tube-used cmd-list-tubes-watched cmd-pause-tube job-timeouts
  total-jobs max-job-size current-tubes current-connections current-producers
  current-workers current-waiting total-connections pid version rusage-utime
  rusage-stime uptime binlog-oldest-index binlog-current-index
  binlog-records-migrated binlog-records-written binlog-max-size draining id
  hostname os platform).map { |k| k.tr('-', '_') }
TUBE_KEYS = %w(name current-jobs-urgent current-jobs-ready current-jobs-reserved
  current-jobs-delayed current-jobs-buried total-jobs current-using
  current-watching current-waiting cmd-delete cmd-pause-tube pause
  pause-time-left).map { |k| k.tr('-', '_') }
JOB_KEYS = %w(id tube state pri age delay ttr time-left file reserves timeouts
  releases buries kicks).map { |k| k.tr('-', '_') }

$passed = 0
$failed = 0

class CheckFailed < StandardError; end

def expect(what, got, want)
  return if got == want
  raise CheckFailed, "#{what}: expected #{want.inspect}, got #{got.inspect}"
end

def expect_raise(what, klass)
  yield
rescue klass
  nil
else
  raise CheckFailed, "#{what}: expected #{klass} to be raised"
end

# One named check; an exception or a failed expectation fails it, and the
# script goes on with the next check.
def check(name)
  Timeout.timeout(10) { yield }
  $passed += 1
  puts "ok   - #{name}"
rescue CheckFailed, StandardError, Timeout::Error => e
  $failed += 1
  puts "FAIL - #{name}: #{e.class}: #{e.message}"
end

def body_of(size, seed)
  (0...size).map { |i| ((i * 31 + seed) % 256).chr }.join.force_encoding('ASCII-8BIT')
end

def wait_for(what, seconds = 3)
  deadline = Time.now + seconds
  until yield
    raise CheckFailed, "#{what}: not reached within #{seconds}s" if Time.now > deadline
    sleep 0.02
  end
end

tag = "bn-#{Process.pid}"
T = "#{tag}-jobs"
T2 = "#{tag}-proc"
BIG = body_of(65535, 7)
BIN = "bin\r\nary\x00body\r\n".b

producer = worker = nil
ids = {}

check("connect two clients") do
  producer = Beaneater.new(ADDR)
  worker = Beaneater.new(ADDR)
  expect("default used tube", producer.tubes.used.name, "default")
  expect("default watch list", worker.tubes.watched.map(&:name), ["default"])
end

start = {}
check("server stats through the library") do
  s = producer.stats          # each attribute read sends `stats` again
  start = { put: s.cmd_put, total: s.total_jobs, pause: s.cmd_pause_tube }
  expect("stats keys in server order", s.keys.first(STATS_KEYS.size), STATS_KEYS)
  expect("version is a string", s.version.is_a?(String) && !s.version.empty?, true)
  expect("hostname is a string", s.hostname.is_a?(String), true)
  expect("platform is a string", s.platform.is_a?(String), true)
  # 1.12 prints `os` unquoted; a `#` there makes it a YAML comment (nil).
  expect("os is a string", s.os.is_a?(String), true) unless s.version == "1.12"
  expect("draining", s.draining, false)
  expect("max-job-size", s.max_job_size, 65535)
  expect("uptime is an integer", s.uptime.is_a?(Integer), true)
  expect("rusage-utime is a number", s.rusage_utime.is_a?(Numeric), true)
  expect("pid is an integer", s.pid.is_a?(Integer), true)
  expect("current-connections >= 2", s.current_connections >= 2, true)
end

check("producer puts jobs with priorities, delays and ttr") do
  tube = producer.tubes[T]
  [["low", 100, 0, 120], ["high", 1, 0, 120], ["mid", 50, 0, 120],
   ["mid2", 50, 0, 120], ["delayed", 0, 3600, 120], ["big", 200, 0, 300],
   ["binary", 300, 0, 60]].each do |name, pri, delay, ttr|
    body = { "big" => BIG, "binary" => BIN }.fetch(name, name)
    res = tube.put(body, pri: pri, delay: delay, ttr: ttr)
    expect("put #{name} status", res[:status], "INSERTED")
    expect("put #{name} id", res[:id] =~ /\A\d+\z/ ? true : res[:id], true)
    ids[name] = res[:id]
  end
  order = ids.values.map(&:to_i)
  expect("ids increase", order, order.sort)
  expect("used tube", producer.tubes.used.name, T)
end

check("tube stats") do
  s = producer.tubes[T].stats
  expect("stats-tube keys", s.keys, TUBE_KEYS)
  expect("name", s.name, T)
  expect("ready", s.current_jobs_ready, 6)
  expect("urgent", s.current_jobs_urgent, 6)
  expect("delayed", s.current_jobs_delayed, 1)
  expect("total", s.total_jobs, 7)
  expect("using", s.current_using, 1)
  expect("pause", s.pause, 0)
end

check("list tubes") do
  names = producer.tubes.all.map(&:name)
  expect("list-tubes has default", names.include?("default"), true)
  expect("list-tubes has #{T}", names.include?(T), true)
end

check("peek ready/delayed/buried and by id") do
  tube = producer.tubes[T]
  expect("peek ready", tube.peek(:ready).body, "high")
  expect("peek delayed", tube.peek(:delayed).body, "delayed")
  expect("peek buried", tube.peek(:buried), nil)
  expect("peek big by id", producer.jobs.find(ids["big"]).body, BIG)
  expect("peek binary by id", producer.jobs.find(ids["binary"]).body, BIN)
  expect("peek missing id", producer.jobs.find(999_999_999), nil)
end

check("job stats") do
  s = producer.jobs.find(ids["delayed"]).stats
  expect("stats-job keys", s.keys, JOB_KEYS)
  expect("id", s.id.to_s, ids["delayed"])
  expect("tube", s.tube, T)
  expect("state", s.state, "delayed")
  expect("delay", s.delay, 3600)
  expect("time-left", (3595..3600).cover?(s.time_left), true)
  expect("file", s.file, 0)
end

check("worker watches only the jobs tube") do
  worker.tubes.watch!(T)
  expect("watched", worker.tubes.watched.map(&:name), [T])
end

high = nil
check("worker reserves the most urgent job first") do
  high = worker.tubes.reserve(0)
  expect("body", high.body, "high")
  expect("id", high.id, ids["high"])
  expect("reserved?", high.reserved?, true)
  s = high.stats
  expect("state", s.state, "reserved")
  expect("reserves", s.reserves, 1)
  expect("ttr", s.ttr, 120)
  expect("time-left", (118..120).cover?(s.time_left), true)
  expect("tube", high.tube, T)
end

check("touch and release with a new priority") do
  expect("touch", high.touch[:status], "TOUCHED")
  expect("release", high.release(pri: 500, delay: 0)[:status], "RELEASED")
  s = high.stats
  expect("state", s.state, "ready")
  expect("pri", s.pri, 500)
  expect("releases", s.releases, 1)
end

mid = nil
check("same priority is FIFO; bury") do
  mid = worker.tubes.reserve(0)
  expect("first of pri 50", mid.body, "mid")
  expect("bury", mid.bury(pri: 7)[:status], "BURIED")
  expect("peek buried", producer.tubes[T].peek(:buried).body, "mid")
  s = mid.stats
  expect("state", s.state, "buried")
  expect("pri", s.pri, 7)
  expect("buries", s.buries, 1)
  expect("tube buried count", producer.tubes[T].stats.current_jobs_buried, 1)
end

check("delete a reserved job") do
  mid2 = worker.tubes.reserve(0)
  expect("second of pri 50", mid2.body, "mid2")
  expect("delete", mid2.delete[:status], "DELETED")
  expect("gone", producer.jobs.find(ids["mid2"]), nil)
  expect("exists?", mid2.exists?, false)
  expect_raise("delete again", Beaneater::NotFoundError) { mid2.delete }
end

check("kick buried jobs, then reserve by the new priority") do
  res = producer.tubes[T].kick(10)
  expect("kick", res[:status], "KICKED")
  expect("kicked count", res[:id], "1")           # buried ones only
  j = worker.tubes.reserve(0)
  expect("kicked job comes first (pri 7)", j.body, "mid")
  expect("kicks", j.stats.kicks, 1)
  j.delete
end

check("remaining jobs come out by priority with bodies intact") do
  got = 4.times.map do
    j = worker.tubes.reserve(0)
    b = j.body
    j.delete
    b
  end
  expect("order", got.map { |b| { BIG => "big", BIN => "binary" }.fetch(b, b) },
         ["low", "big", "binary", "high"])
  expect("65535-byte body", got[1], BIG)
  expect("binary body", got[2], BIN)
end

check("reserve with timeout 0 on an empty tube times out") do
  expect_raise("reserve(0)", Beaneater::TimedOutError) { worker.tubes.reserve(0) }
end

check("kick-job a delayed job") do
  d = producer.jobs.find(ids["delayed"])
  expect("kick-job", d.kick[:status], "KICKED")
  j = worker.tubes.reserve(0)
  expect("body", j.body, "delayed")
  expect("kicks", j.stats.kicks, 1)
  j.delete
end

check("blocking reserve is woken by a put") do
  t = Thread.new do
    sleep 0.2
    Beaneater.new(ADDR).tap { |c| c.tubes[T].put("late", pri: 5); c.close }
  end
  j = worker.tubes.reserve(5)
  t.join
  expect("body", j.body, "late")
  j.delete
end

check("DEADLINE_SOON inside the last second of the TTR") do
  producer.tubes[T].put("short", ttr: 1)
  j = worker.tubes.reserve(0)
  expect("body", j.body, "short")
  expect_raise("reserve again", Beaneater::DeadlineSoonError) { worker.tubes.reserve(0) }
  j.delete
end

check("a closed connection's reserved job goes back to ready") do
  w2 = Beaneater.new(ADDR)
  producer.tubes[T].put("orphan")
  j = w2.tubes[T].reserve(0)
  expect("body", j.body, "orphan")
  expect("state", producer.jobs.find(j.id).stats.state, "reserved")
  w2.close
  wait_for("job ready again") { producer.jobs.find(j.id).stats.state == "ready" }
  k = worker.tubes.reserve(0)
  expect("reserved by the next worker", k.id, j.id)
  expect("reserves", k.stats.reserves, 2)
  k.delete
end

check("pause-tube") do
  tube = producer.tubes[T]
  expect("pause", tube.pause(3600)[:status], "PAUSED")
  tube.put("paused job")
  s = tube.stats
  expect("pause", s.pause, 3600)
  expect("pause-time-left", (3595..3600).cover?(s.pause_time_left), true)
  expect_raise("reserve from a paused tube", Beaneater::TimedOutError) { worker.tubes.reserve(0) }
  tube.pause(0)
  j = worker.tubes.reserve(0)
  expect("after unpause", j.body, "paused job")
  j.delete
end

check("errors surface as the library's exceptions") do
  expect_raise("use a bad name", Beaneater::InvalidTubeName) { producer.tubes.use("-bad") }
  expect_raise("watch a bad name", Beaneater::InvalidTubeName) { worker.tubes.watch("a b") }
  expect_raise("ignore the last tube", Beaneater::NotIgnoredError) { worker.tubes.ignore(T) }
  expect_raise("job too big", Beaneater::JobTooBigError) do
    producer.tubes[T].put("x" * 65536)
  end
  expect_raise("stats of a missing job", Beaneater::NotFoundError) do
    producer.connection.transmit("stats-job 999999999")
  end
  expect_raise("stats of a missing tube", Beaneater::NotFoundError) do
    producer.tubes["#{tag}-nosuch"].stats
  end
  expect_raise("unknown command", Beaneater::UnknownCommandError) do
    producer.connection.transmit("frobnicate")
  end
  expect_raise("bad format", Beaneater::BadFormatError) do
    producer.connection.transmit("delete x")
  end
  # the connection still works after the errors
  expect("list-tube-used", producer.tubes.used.name, T)
end

check("worker loop of the library (Jobs#process!)") do
  w3 = Beaneater.new(ADDR)
  seen = []
  w3.jobs.register(T2) do |job|
    seen << job.body
    raise Beaneater::AbortProcessingError if job.body == "stop"
  end
  %w(a b stop).each_with_index { |b, i| producer.tubes[T2].put(b, pri: i) }
  w3.jobs.process!(reserve_timeout: 1)
  expect("processed in order", seen, %w(a b stop))
  s = producer.tubes[T2].stats
  expect("a and b deleted, stop buried", [s.current_jobs_ready, s.current_jobs_buried], [0, 1])
  w3.close
end

check("server counters moved as expected") do
  s = producer.stats
  expect("cmd-put grew", s.cmd_put - start[:put] >= 14, true)
  expect("total-jobs grew", s.total_jobs - start[:total] >= 14, true)
  expect("current-producers >= 1", s.current_producers >= 1, true)
  expect("current-workers >= 1", s.current_workers >= 1, true)
  expect("cmd-pause-tube grew by 2", s.cmd_pause_tube - start[:pause], 2)
end

check("clear the tubes") do
  producer.tubes[T2].clear
  producer.tubes[T].clear
  expect("nothing left", producer.tubes[T2].peek(:buried), nil)
  producer.tubes.use("default")
  worker.tubes.watch!("default")
  wait_for("tubes gone") do
    !producer.tubes.all.map(&:name).include?(T2)
  end
end

[producer, worker].each { |c| c.close if c }
puts "beaneater: #{$passed} passed, #{$failed} failed"
exit($failed.zero? && $passed > 0 ? 0 : 1)
